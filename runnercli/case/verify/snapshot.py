"""The worktree's index, copied before the agent starts, with no entry git would trust unread.

git passes over an entry marked assume-unchanged or skip-worktree when it compares the files
with the index: an agent's change to such a file would go unseen. A new worktree has these
marks from the member's checkout alone — its sparse-checkout patterns, which git gives a new
worktree (every path outside them is skip-worktree and not on disk), or a post-checkout hook —
and the copy has them cleared, so git looks at those files as at any other. The paths a
skip-worktree mark kept off the disk are remembered: their absence is how the case started.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from runnercli.case.repo.git import git_env
from runnercli.case.verify.gitview import index_path


@dataclass(frozen=True)
class Snapshot:
    """The worktree's index as it was before the agent started, and when it was written."""

    data: bytes
    mtime: float
    # Paths marked skip-worktree that were not on disk (outside a sparse checkout).
    absent: frozenset[str] = field(default_factory=frozenset)


def snapshot_index(worktree: Path) -> Snapshot | None:
    """A copy of the worktree's index as it is now (before the agent starts), its
    assume-unchanged and skip-worktree marks cleared."""
    path = index_path(worktree)
    if path is None:
        return None
    try:
        mtime = path.stat().st_mtime
        data = path.read_bytes()
    except OSError:
        return None
    with tempfile.TemporaryDirectory(prefix="everdict-index-") as scratch:
        copy = Path(scratch, "index")
        copy.write_bytes(data)
        # With the index's own time, git re-reads the same racy entries as it would there.
        os.utime(copy, (mtime, mtime))
        return _unmarked(worktree, copy, data, mtime)


def _unmarked(worktree: Path, copy: Path, data: bytes, mtime: float) -> Snapshot | None:
    """The copy (`data`) with its marks cleared; None when git cannot clear them (the check
    then hashes every file of the start commit, trusting no mark)."""
    listed = _git(worktree, copy, ["ls-files", "-v", "-z"])
    if listed is None:
        return None
    assumed, skipped = [], []
    for item in filter(None, listed.split(b"\0")):
        tag, name = item[:1], item[2:]
        if tag.islower():  # assume-unchanged (`s`: both marks)
            assumed.append(name)
        if tag in (b"S", b"s"):
            skipped.append(name)
    if not assumed and not skipped:
        return Snapshot(data, mtime)
    for flag, names in (("--no-assume-unchanged", assumed), ("--no-skip-worktree", skipped)):
        if names and _git(worktree, copy, ["update-index", flag, "-z", "--stdin"], names) is None:
            return None
    absent = {os.fsdecode(n) for n in skipped if not os.path.lexists(worktree / os.fsdecode(n))}
    # The entries' stat data are as they were, and so is the time they are judged against.
    return Snapshot(copy.read_bytes(), mtime, frozenset(absent))


def _git(worktree: Path, index: Path, args: list[str], names: Sequence[bytes] = ()) -> bytes | None:
    done = subprocess.run(
        ["git", "-C", str(worktree), "-c", "core.hooksPath=/dev/null", *args],
        input=b"".join(name + b"\0" for name in names),
        env=git_env({"GIT_INDEX_FILE": str(index)}),
        capture_output=True,
        check=False,
    )
    return done.stdout if done.returncode == 0 else None
