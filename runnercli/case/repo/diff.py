"""`repo.diff`: everything a case changed in its worktree, as one binary-safe patch.

Modified, added (untracked new files included, ignored ones not) and deleted files, relative
to the commit the case started from. The worktree's own index is left alone: `git add -A`
goes into a temporary copy of it (`GIT_INDEX_FILE`), its assume-unchanged marks cleared, then
`git diff --cached --binary` of that against the start commit. The member's configuration
cannot change the patch's shape (prefixes, colours, external diff drivers), so `git apply`
takes it back. The patch is read as it streams and cut, with a marker line, past the size
asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from pathlib import Path

from runnercli.case.repo.git import GitError, git, git_argv, git_env
from runnercli.case.repo.worktree import Worktree

DIFF_ARTIFACT_PATH = "repo.diff"
DIFF_MEDIA_TYPE = "text/x-diff"
DIFF_CUT_MARKER = b"# everdict: repo.diff was cut here, at its size limit; the rest is not shown"
_CHUNK = 64 * 1024
_STDERR_KEPT = 4096
# Paths named on one command line (well under any system's argument limit).
_MARKS_PER_CALL = 500
_DIFF_OPTIONS = (
    "--binary",
    "--no-color",
    "--no-ext-diff",
    "--no-textconv",
    "--no-relative",
    "--find-renames",
    "--src-prefix=a/",
    "--dst-prefix=b/",
)


async def repo_diff(worktree: Worktree, max_bytes: int) -> bytes:
    """What the case changed in its worktree since it started, at most `max_bytes` (then cut
    at a line end, with DIFF_CUT_MARKER)."""
    return await diff_since(worktree.path, worktree.start, max_bytes)


async def diff_since(path: Path, start: str, max_bytes: int) -> bytes:
    """The patch from commit `start` to the files of the worktree at `path`."""
    own_index = Path((await git(path, "rev-parse", "--git-path", "index")).text)
    own_index = own_index if own_index.is_absolute() else path / own_index
    with tempfile.TemporaryDirectory(prefix="everdict-diff-") as scratch:
        index = Path(scratch) / "index"
        # Starting from the worktree's index spares re-hashing every unchanged file.
        if own_index.is_file():
            await asyncio.to_thread(shutil.copyfile, own_index, index)
        env = {"GIT_INDEX_FILE": str(index)}
        await _unassume(path, env)
        await git(path, "-c", "core.safecrlf=false", "add", "--all", env=env)
        return await _bounded(path, ["diff", "--cached", *_DIFF_OPTIONS, start], env, max_bytes)


async def _unassume(path: Path, env: dict[str, str]) -> None:
    """Clear the index copy's assume-unchanged marks (a case may have set them in its
    worktree): `git add` passes over a marked file, and its change would be missing."""
    listed = await git(path, "ls-files", "-v", "-z", env=env)
    marked = [item[2:] for item in listed.stdout.split(b"\0") if item[:1].islower()]
    for at in range(0, len(marked), _MARKS_PER_CALL):
        names = [os.fsdecode(name) for name in marked[at : at + _MARKS_PER_CALL]]
        await git(path, "update-index", "--no-assume-unchanged", "--", *names, env=env)


async def _bounded(path: Path, args: list[str], env: dict[str, str], limit: int) -> bytes:
    proc = await asyncio.create_subprocess_exec(
        *git_argv(path, *args),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=git_env(env),
    )
    assert proc.stdout is not None and proc.stderr is not None
    stderr = asyncio.create_task(_tail(proc.stderr))
    kept = bytearray()
    whole = False
    try:
        while len(kept) <= limit and (chunk := await proc.stdout.read(_CHUNK)):
            kept += chunk
        whole = len(kept) <= limit
    finally:
        # Past the limit (or cancelled) the rest is not wanted: git need not write it.
        if not whole:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        await proc.wait()
        said = await stderr
    if len(kept) > limit:
        return _cut(bytes(kept), limit)
    if proc.returncode != 0:
        last = said.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git diff failed: {last[-1] if last else proc.returncode}")
    return bytes(kept)


async def _tail(stream: asyncio.StreamReader) -> bytes:
    tail = b""
    while chunk := await stream.read(_CHUNK):
        tail = (tail + chunk)[-_STDERR_KEPT:]
    return tail


def _cut(data: bytes, limit: int) -> bytes:
    """`data` cut to at most `limit` bytes before the marker, at a line end when there is one."""
    room = max(limit - len(DIFF_CUT_MARKER) - 2, 0)
    end = data.rfind(b"\n", 0, room)
    head = data[: end + 1] if end >= 0 else data[:room] + b"\n"
    return head + DIFF_CUT_MARKER + b"\n"
