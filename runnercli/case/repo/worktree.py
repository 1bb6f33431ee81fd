"""A case's own detached `git worktree` of the member's checkout.

A case never runs in the member's checkout: it gets a worktree inside its case directory at
`head` (HEAD's commit), `working` (HEAD plus the member's uncommitted tracked changes) or `run`
(the commit the run names). For `working`, `git stash create` runs against a copy of the
checkout's index (`GIT_INDEX_FILE`), because it refreshes stale stat data in the index it
reads: the member's `.git/index`, files and stash list stay byte-for-byte as they were. The
worktree is checked out at that stash commit, whose tree is exactly the member's working
files, then reset (mixed) to HEAD, so the case sees HEAD as its base and the member's changes
as uncommitted ones, as the member does.

`git worktree add` and `remove` on one repository race on `.git/worktrees`, so each checkout
has an asyncio lock: several cases of one repo each get their own worktree, one after another.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from runnercli.case.repo.git import GitError, git
from runnercli.case.repo.leftovers import CASE_DIR_PREFIX, is_leftover, rmtree, sweep_case_dirs
from runnercli.case.repo.owner import owner_forget, owner_write

Ref = Literal["head", "working", "run"]
REFS: tuple[Ref, ...] = ("head", "working", "run")
WORKTREE_DIR = "repo"
SHA_RE = re.compile(r"[0-9a-f]{4,64}")
ADD_ATTEMPTS = 3
ADD_RETRY_S = 0.2


class RepoError(Exception):
    """A worktree cannot be made or removed; the message says why and, when it can, what
    fixes it."""


@dataclass(frozen=True)
class RepoState:
    """What a result's fingerprint says of the repo: `{name, sha, dirty, base}`."""

    name: str
    sha: str  # the base commit (HEAD's, or the run's)
    dirty: bool  # the member's uncommitted changes were added on top of it
    base: str  # the ref asked: head, working or run

    def fingerprint(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Worktree:
    path: Path
    checkout: Path
    case_dir: Path
    start: str  # the commit whose tree the case started from (the stash commit when dirty)
    state: RepoState


class Worktrees:
    """The worktrees one runner makes and removes, one lock per checkout."""

    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    def lock(self, checkout: Path) -> asyncio.Lock:
        return self._locks.setdefault(os.path.realpath(checkout), asyncio.Lock())

    async def add(
        self,
        *,
        name: str,
        checkout: Path,
        case_dir: Path,
        ref: str,
        sha: str | None = None,
        dirname: str = WORKTREE_DIR,
    ) -> Worktree:
        """Make a detached worktree of `checkout` at `case_dir/dirname` for the case."""
        checkout, case_dir = Path(checkout), Path(case_dir)
        if not checkout.is_dir():
            raise RepoError(
                f"the checkout mapped to {name} is gone: {checkout} "
                f"(map it again: `python -m runnercli repo add {name} PATH`)"
            )
        path = case_dir / dirname
        if os.path.lexists(path):
            raise RepoError(f"cannot make a worktree of {name} at {path}: it exists already")
        base, start, dirty = await _start_point(name, checkout, ref, sha)
        owner_write(case_dir)
        async with self.lock(checkout):
            try:
                await _worktree_add(checkout, path, start)
                if start != base:
                    await git(path, "reset", "--quiet", base)
            except GitError as exc:
                await _deregister(checkout, path)
                raise RepoError(f"cannot make a worktree of {name} at {checkout}: {exc}") from exc
        return Worktree(path, checkout, case_dir, start, RepoState(name, base, dirty, ref))

    async def remove(self, worktree: Worktree) -> None:
        """Remove the worktree and its registration; fine when its directory is gone."""
        async with self.lock(worktree.checkout):
            await _deregister(worktree.checkout, worktree.path)
        owner_forget(worktree.case_dir)

    async def remove_leftovers(
        self, checkouts: Iterable[Path], *, root: Path | None = None, prefix: str = CASE_DIR_PREFIX
    ) -> list[Path]:
        """Remove the worktrees a runner stopped with `kill -9` left registered in
        `checkouts`, and its case directories under `root`; return the worktrees removed.

        Only worktrees inside a case directory `root/prefix…` count, and only when their
        directory is gone or the runner that made them is no longer alive: worktrees the
        member made, and those of a runner still running, are left alone.
        """
        root = Path(root or tempfile.gettempdir())
        removed: list[Path] = []
        for checkout in checkouts:
            if not Path(checkout).is_dir():
                continue
            async with self.lock(checkout):
                for path in await registered_worktrees(checkout):
                    if is_leftover(path, root, prefix):
                        await _deregister(checkout, path)
                        removed.append(path)
        await asyncio.to_thread(sweep_case_dirs, root, prefix)
        return removed


async def _worktree_add(checkout: Path, path: Path, commit: str) -> None:
    """`git worktree add --detach`, tried again when it fails: another process (a second
    runner) adding a worktree to the same repository at once can make git read its
    half-written `.git/worktrees` entry."""
    for attempt in range(1, ADD_ATTEMPTS + 1):
        try:
            await git(checkout, "worktree", "add", "--detach", "--quiet", str(path), commit)
            return
        except GitError:
            if attempt == ADD_ATTEMPTS:
                raise
            await _deregister(checkout, path)
            await asyncio.sleep(ADD_RETRY_S * attempt)


async def _start_point(
    name: str, checkout: Path, ref: str, sha: str | None
) -> tuple[str, str, bool]:
    """(base commit, commit to check out, dirty) for `ref`."""
    if ref == "run":
        commit = await _run_commit(name, checkout, sha)
        return commit, commit, False
    if ref not in REFS:
        raise RepoError(f"repo ref {ref!r} is not one of {', '.join(REFS)}")
    head = await _head(name, checkout)
    if ref == "head":
        return head, head, False
    stash = await _uncommitted(checkout)
    return head, stash or head, stash is not None


async def _head(name: str, checkout: Path) -> str:
    found = await git(checkout, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
    if found.returncode == 0:
        return found.text
    probe = await git(checkout, "rev-parse", "--git-dir", check=False)
    if probe.returncode != 0:
        raise RepoError(
            f"not a git checkout any more: {checkout} "
            f"(map {name} again: `python -m runnercli repo add {name} PATH`)"
        )
    raise RepoError(f"{name} at {checkout} has no commit yet")


async def _run_commit(name: str, checkout: Path, sha: str | None) -> str:
    wanted = (sha or "").strip().lower()
    if not SHA_RE.fullmatch(wanted):
        raise RepoError(f"the run's git_sha {sha!r} is not a commit SHA (4 to 64 hex digits)")
    found = await git(checkout, "rev-parse", "--verify", f"{wanted}^{{commit}}", check=False)
    if found.returncode == 0:
        return found.text
    if b"ambiguous" in found.stderr:
        raise RepoError(f"commit {sha} is ambiguous in {name} at {checkout}: give more digits")
    raise RepoError(
        f"commit {sha} is not in the local clone of {name} at {checkout}: fetch it first"
    )


async def _uncommitted(checkout: Path) -> str | None:
    """The commit `git stash create` makes of the uncommitted tracked changes, or None."""
    index = Path((await git(checkout, "rev-parse", "--git-path", "index")).text)
    index = index if index.is_absolute() else checkout / index
    with tempfile.TemporaryDirectory(prefix="everdict-index-") as scratch:
        copy = Path(scratch) / "index"
        if index.is_file():
            await asyncio.to_thread(shutil.copyfile, index, copy)
        made = await git(checkout, "stash", "create", env={"GIT_INDEX_FILE": str(copy)})
    return made.text or None


async def registered_worktrees(checkout: Path) -> list[Path]:
    """The linked worktrees registered in `checkout`'s repository (not the main one)."""
    listed = await git(checkout, "worktree", "list", "--porcelain")
    paths = [
        Path(line[len("worktree ") :])
        for line in listed.stdout.decode("utf-8", "surrogateescape").splitlines()
        if line.startswith("worktree ")
    ]
    return paths[1:]


async def _deregister(checkout: Path, path: Path) -> None:
    """`git worktree remove --force`, emptying the directory first when git refuses (a case
    may have deleted the worktree's `.git` file); registration removed either way."""
    if not checkout.is_dir():
        await asyncio.to_thread(rmtree, path)
        return
    remove = ("worktree", "remove", "--force", "--force", str(path))
    if (await git(checkout, *remove, check=False)).returncode == 0:
        return
    await asyncio.to_thread(rmtree, path)
    if (await git(checkout, *remove, check=False)).returncode == 0:
        return
    registered = {os.path.realpath(p) for p in await registered_worktrees(checkout)}
    if os.path.realpath(path) in registered:
        raise RepoError(f"cannot remove the worktree {path} of {checkout}")
