"""A case's hidden files: written into the worktree once the agent has ended, before the
verifier runs, and taken away again once it has (so that no artifact and no later read of
the worktree holds them). A file standing where one goes is kept aside and put back."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from runnercli.case.verify.restore import real_parent
from runnercli.protocol.verifying import check_worktree_path


class HiddenFiles:
    def __init__(self, worktree: Path, files: Mapping[str, str]) -> None:
        self.worktree = worktree
        self.files = dict(files)
        self.written: list[Path] = []
        self.made: list[Path] = []
        self.kept: dict[Path, bytes] = {}

    def write(self) -> None:
        for path, content in self.files.items():
            check_worktree_path(path, "hidden_files")
            # What the agent left may not send a hidden file outside the worktree.
            here = real_parent(self.worktree, path, self.made)
            target = here / path.rsplit("/", 1)[-1]
            if target.is_symlink():
                target.unlink()
            elif target.is_dir():
                shutil.rmtree(target)
            elif target.is_file():
                self.kept[target] = target.read_bytes()
                target.unlink()
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(content)
            self.written.append(target)

    def remove(self) -> None:
        for target in self.written:
            if target.is_file() and not target.is_symlink():
                target.unlink()
            if target in self.kept:
                target.write_bytes(self.kept[target])
        for directory in reversed(self.made):
            shutil.rmtree(directory, ignore_errors=True)
        self.written, self.made, self.kept = [], [], {}
