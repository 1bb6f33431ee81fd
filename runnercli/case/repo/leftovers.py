"""What a runner stopped with `kill -9` left behind: worktrees and case directories.

A case directory is `ROOT/everdict-case-…` (the runner's temporary directory); the worktree
is a directory inside it, and its owner file names the runner process that made it. A
registered worktree is a leftover when it lies in such a case directory and either its
directory is gone or its owner is no longer alive. A worktree anywhere else, or without an
owner file, was not made by a runner and is never touched.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from runnercli.case.repo.owner import OWNER_FILE, owner_read

# The prefix of the runner's case directories (`tempfile.mkdtemp(prefix=…)`).
CASE_DIR_PREFIX = "everdict-case-"


def in_case_dir(path: Path, root: Path, prefix: str = CASE_DIR_PREFIX) -> bool:
    """Whether `path` is directly inside a case directory `root/prefix…` (compared by
    resolved path components, never by string prefix)."""
    case_dir = Path(os.path.realpath(path)).parent
    return case_dir.parent == Path(os.path.realpath(root)) and case_dir.name.startswith(prefix)


def is_leftover(path: Path, root: Path, prefix: str = CASE_DIR_PREFIX) -> bool:
    """Whether the registered worktree at `path` was left by a runner that is gone."""
    if not in_case_dir(path, root, prefix):
        return False
    if not os.path.lexists(path):
        return True
    owner = owner_read(path.parent)
    return owner is not None and not owner.alive()


def sweep_case_dirs(root: Path, prefix: str = CASE_DIR_PREFIX) -> list[Path]:
    """Remove the case directories under `root` whose owner file names a dead runner."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return removed
    for entry in entries:
        if not entry.name.startswith(prefix) or not entry.is_dir(follow_symlinks=False):
            continue
        case_dir = Path(entry.path)
        owner = owner_read(case_dir) if (case_dir / OWNER_FILE).is_file() else None
        if owner is not None and not owner.alive():
            rmtree(case_dir)
            removed.append(case_dir)
    return removed


def rmtree(path: Path) -> None:
    """Remove a directory tree, even one a case made read-only."""
    shutil.rmtree(path, ignore_errors=True)
    if not os.path.lexists(path):
        return
    for directory, _, _ in os.walk(path):
        os.chmod(directory, 0o700)
    shutil.rmtree(path, ignore_errors=True)
