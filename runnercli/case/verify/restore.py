"""Putting protected paths back as the start commit has them: each entry's bytes written by
the runner itself — never through a symbolic link or a filter — and what the agent added there
removed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

LINK_MODE = "120000"
EXEC_MODE = "100755"
FILE_MODE = "100644"


def real_parent(worktree: Path, path: str, made: list[Path] | None = None) -> Path:
    """The directory `path` goes in, made of real directories (a symbolic link or a
    file standing where one of them should be is removed); those it creates are appended
    to `made`."""
    here = worktree
    for part in path.split("/")[:-1]:
        here = here / part
        if here.is_symlink() or (here.exists() and not here.is_dir()):
            here.unlink()
        if not here.exists():
            here.mkdir()
            if made is not None:
                made.append(here)
    return here


def remove(worktree: Path, path: str) -> None:
    """Remove what the agent added at `path` (never through a symbolic link above it)."""
    target = worktree / path
    for parent in list(reversed(Path(path).parents))[1:]:
        if (worktree / parent).is_symlink():
            return  # under a symbolic link: the link itself is dealt with
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)


def write(worktree: Path, path: str, mode: str, body: bytes) -> None:
    """Write a start commit's entry at `path`, whatever stands there now."""
    target = real_parent(worktree, path) / path.rsplit("/", 1)[-1]
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)
    if mode == LINK_MODE:
        os.symlink(os.fsdecode(body), target)
        return
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as handle:
        handle.write(body)
    os.chmod(target, 0o755 if mode == EXEC_MODE else 0o644)
