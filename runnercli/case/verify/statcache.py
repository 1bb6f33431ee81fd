"""Which files are as git last wrote them: a worktree's index read for its stat data.

An index entry holds each file's size, modification and change times and inode as git saw
them when it wrote the file. A file whose `lstat` still says the same — its change time
cannot be set back by anyone — and that is not newer than the index itself (git's "racy"
rule) holds the bytes the entry names, so it need not be read. The runner keeps a copy of
the worktree's index taken before the agent starts (the agent's own `git add` changes nothing
here); only versions 2 and 3 are read, any other leaves every file to be hashed.
"""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

_HEADER = struct.Struct(">4sLL")
_STAT = struct.Struct(">10L")
_EXTENDED = 0x4000
_NAME_MASK = 0x0FFF


@dataclass(frozen=True)
class Cached:
    sha: str
    ctime: int
    mtime_s: int
    mtime_ns: int
    ino: int
    size: int
    mode: int


def read_index(data: bytes, sha_bytes: int = 20) -> dict[str, Cached]:
    """The entries of an index (version 2 or 3) by path; {} for anything else."""
    if len(data) < _HEADER.size:
        return {}
    signature, version, count = _HEADER.unpack_from(data)
    if signature != b"DIRC" or version not in (2, 3):
        return {}
    entries: dict[str, Cached] = {}
    at = _HEADER.size
    try:
        for _ in range(count):
            start = at
            ctime, _ctime_ns, mtime_s, mtime_ns, _dev, ino, mode, _uid, _gid, size = (
                _STAT.unpack_from(data, at)
            )
            at += _STAT.size
            sha = data[at : at + sha_bytes].hex()
            at += sha_bytes
            (flags,) = struct.unpack_from(">H", data, at)
            at += 2
            if flags & _EXTENDED:
                at += 2
            end = data.index(b"\0", at)
            path = data[at:end].decode("utf-8", "surrogateescape")
            # Each entry is padded with 1 to 8 NULs to a multiple of 8 bytes.
            at = start + ((end - start) // 8 + 1) * 8
            if flags >> 12 & 3:  # a merge stage: not a clean entry
                continue
            entries[path] = Cached(sha, ctime, mtime_s, mtime_ns, ino, size, mode)
    except (struct.error, ValueError):
        return {}
    return entries


def unchanged(cached: Cached, info: os.stat_result, index_mtime: float) -> bool:
    """Whether the file `info` describes still holds the bytes of `cached`."""
    if info.st_mtime >= index_mtime:  # racy: written in the same moment as the index
        return False
    return (
        int(info.st_ctime) == cached.ctime
        and int(info.st_mtime) == cached.mtime_s
        and info.st_mtime_ns % 1_000_000_000 == cached.mtime_ns
        and (info.st_ino & 0xFFFFFFFF) == cached.ino
        and (info.st_size & 0xFFFFFFFF) == cached.size
        and stat.S_IFMT(info.st_mode) == stat.S_IFMT(cached.mode)
    )


def index_path(worktree: Path) -> Path | None:
    """The worktree's own index file (a linked worktree's `.git` names its git directory)."""
    dot_git = worktree / ".git"
    if dot_git.is_file():
        text = dot_git.read_text().strip()
        if text.startswith("gitdir: "):
            gitdir = Path(text.removeprefix("gitdir: "))
            gitdir = gitdir if gitdir.is_absolute() else worktree / gitdir
            return gitdir / "index"
        return None
    return dot_git / "index" if dot_git.is_dir() else None
