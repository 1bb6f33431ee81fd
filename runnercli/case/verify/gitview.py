"""The worktree as git sees it against the index copy taken before the agent started.

git does the scanning, as `git status` would: `diff-files` compares each file's stat data
with the copy's entries (it reads no file whose stat data changed: those are only named, and
hashed afterwards with git's filters off), `ls-files --others` lists what is new without any
ignore rule. Both run through a git directory of our own that borrows the checkout's objects:
its configuration, attributes and hooks are ours (no clean filter, fsmonitor, `ignoreStat` or
`trustctime` the agent may have set in the checkout counts), and the index is the copy, with
its own modification time (git's racy-entry rule holds: an entry written in the moment of the
index is compared by content, and an empty file reads as empty through any conversion).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runnercli.case.repo.git import GitError, git_env

# Our own configuration: the defaults, stated where the checkout's could have changed them.
_OPTIONS = (
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "core.attributesFile=/dev/null",
    "-c",
    "core.excludesFile=/dev/null",
)


@dataclass(frozen=True)
class Tracked:
    """A file of the index copy that is not as the copy says (by stat data, or gone)."""

    path: str
    mode: str  # the copy's (the start commit's) mode
    sha: str  # the copy's blob


def _own_gitdir(worktree: Path) -> Path | None:
    """The worktree's own git directory (a linked worktree's `.git` file names it)."""
    dot_git = worktree / ".git"
    if dot_git.is_dir():
        return dot_git
    try:
        text = dot_git.read_text().strip()
    except OSError:
        return None
    if not text.startswith("gitdir: "):
        return None
    gitdir = Path(text.removeprefix("gitdir: "))
    return gitdir if gitdir.is_absolute() else worktree / gitdir


def index_path(worktree: Path) -> Path | None:
    """The worktree's own index file."""
    gitdir = _own_gitdir(worktree)
    return gitdir / "index" if gitdir is not None else None


def common_dir(worktree: Path) -> Path | None:
    """The checkout's git directory that holds its objects (a linked worktree's `.git` file
    names its own git directory, whose `commondir` names the shared one)."""
    gitdir = _own_gitdir(worktree)
    if gitdir is None:
        return None
    try:
        common = (gitdir / "commondir").read_text().strip()
    except OSError:
        return gitdir
    return Path(common) if os.path.isabs(common) else gitdir / common


class GitView:
    """A scratch git directory over `worktree` with the index copy; `close()` removes it."""

    def __init__(self, worktree: Path, start: str, index: bytes | None, mtime: float) -> None:
        self.worktree = worktree
        self.start = start
        common = common_dir(worktree)
        if common is None:
            raise GitError(f"{worktree} is not a git checkout")
        self.common = common
        self.scratch = tempfile.TemporaryDirectory(prefix="everdict-protect-")
        self.gitdir = Path(self.scratch.name, "git")
        (self.gitdir / "refs").mkdir(parents=True)
        (self.gitdir / "info").mkdir()
        (self.gitdir / "HEAD").write_text("ref: refs/heads/start\n")
        # A 64-digit start commit is a SHA-256 repository's.
        sha256 = len(start) == 64
        (self.gitdir / "config").write_text(
            "[core]\n\trepositoryformatversion = 1\n\tbare = false\n"
            + ("[extensions]\n\tobjectformat = sha256\n" if sha256 else "")
        )
        self.index = self.gitdir / "index"
        if index is not None:
            self.index.write_bytes(index)
            os.utime(self.index, (mtime, mtime))
        else:
            # No copy: the start commit's entries, with no stat data (every file is hashed).
            self.run(["read-tree", start])

    def close(self) -> None:
        self.scratch.cleanup()

    def argv(
        self, args: Sequence[str], options: Sequence[str] = (), where: Path | None = None
    ) -> list[str]:
        """git in the worktree (or `where`) with our options (and `options`, which override
        them) running `args`."""
        return [_git_path(), "-C", str(where or self.worktree), *_OPTIONS, *options, *args]

    def env(self) -> dict[str, str]:
        return git_env(
            {
                "GIT_DIR": str(self.gitdir),
                "GIT_WORK_TREE": str(self.worktree),
                "GIT_INDEX_FILE": str(self.index),
                "GIT_OBJECT_DIRECTORY": str(self.common / "objects"),
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull,
            }
        )

    def run(self, args: Sequence[str], data: bytes | None = None) -> bytes:
        return self.run_all([(args, data)])[0]

    def run_all(self, commands: Sequence[tuple[Sequence[str], bytes | None]]) -> list[bytes]:
        """Run git commands at once (each its own process); their outputs, in order."""
        env = self.env()
        # No `cwd` and no descriptor to close (ours are not inherited): Python then starts
        # each with posix_spawn, a fraction of a fork of the runner.
        procs = [
            subprocess.Popen(
                self.argv(args),
                close_fds=False,
                env=env,
                stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for args, data in commands
        ]
        outs = []
        for (args, data), proc in zip(commands, procs, strict=True):
            out, err = proc.communicate(data)
            if proc.returncode != 0:
                said = err.decode("utf-8", "replace").strip().splitlines()
                raise GitError(f"git {args[0]} failed: {said[-1] if said else proc.returncode}")
            outs.append(out)
        return outs


@functools.cache
def _git_path() -> str:
    # A path with a directory: what lets Python start git with posix_spawn.
    return shutil.which("git") or "git"


def parse_diff_files(out: bytes) -> list[Tracked]:
    """`diff-files --raw -z`: `:srcmode dstmode srcsha dstsha status NUL path NUL`."""
    fields = out.split(b"\0")
    tracked = []
    for meta, name in zip(fields[0::2], fields[1::2], strict=False):
        if not meta.startswith(b":"):
            continue
        mode, _, sha, _, _ = meta[1:].decode().split(" ")
        tracked.append(Tracked(os.fsdecode(name), mode, sha))
    return tracked


def parse_names(out: bytes) -> list[str]:
    return [os.fsdecode(name) for name in out.split(b"\0") if name]
