"""Paths the server asks for, confined to a case's directory.

The server names a file of a running case by a relative path; the runner answers only for
what lies inside the case directory. Refused: NUL, absolute paths, drive letters, `..`
components (with `\\` read as a separator too), and any path whose symlinks, resolved, lead
out of the directory — compared component by component, so `/tmp/case-1` never admits
`/tmp/case-10`. A file is opened without following a final symlink and, where the system says
what an open descriptor points at, checked again after opening (a case swapping a directory
for a symlink between the check and the open gains nothing). A file over the size limit is
refused from its metadata, before any byte is read.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

MAX_LISTING_ENTRIES = 1000
_DRIVE_RE = re.compile(r"^[A-Za-z]:")
_SEPARATORS_RE = re.compile(r"[/\\]")


class ConfineError(Exception):
    """A request the runner will not answer; `reason` is one of `refused`, `not_found`,
    `too_large`, `not_a_file`, `not_a_directory`."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Entry:
    path: str  # relative to the root, `/`-separated
    size: int
    kind: str  # file, dir, symlink, or other (a FIFO, a socket…)
    mtime: float  # seconds since the epoch

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Listing:
    path: str
    entries: list[Entry]
    truncated: bool  # the directory holds more than the entries given


def parts_of(relative: str) -> list[str]:
    """The components of a requested path; raise ConfineError for one that could escape."""
    if "\x00" in relative:
        raise ConfineError("refused", "a path may not contain NUL")
    if relative.startswith(("/", "\\")):
        raise ConfineError("refused", f"{relative!r} is absolute; paths are relative to the case")
    if _DRIVE_RE.match(relative):
        raise ConfineError("refused", f"{relative!r} names a drive; paths are relative")
    parts = [part for part in _SEPARATORS_RE.split(relative) if part not in ("", ".")]
    if ".." in parts:
        raise ConfineError("refused", f"{relative!r} goes up with '..'")
    return parts


def inside(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """Whether `path` is `root` or below it, by components (both taken as they are)."""
    path, root = Path(path), Path(root)
    return path == root or root in path.parents


def resolve_inside(root: str | os.PathLike[str], relative: str) -> Path:
    """The real path `relative` names under `root`; raise ConfineError when it escapes."""
    parts = parts_of(relative)
    base = Path(os.path.realpath(root))
    real = Path(os.path.realpath(base.joinpath(*parts)))
    if not inside(real, base):
        raise ConfineError("refused", f"{relative!r} leads out of the case directory")
    return real


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"


def _entry(path: str, info: os.stat_result) -> Entry:
    return Entry(path, info.st_size, _kind(info.st_mode), info.st_mtime)


def describe(root: str | os.PathLike[str], relative: str) -> Entry:
    """What `relative` is (its target, when it is a symlink that stays inside)."""
    target = resolve_inside(root, relative)
    try:
        return _entry("/".join(parts_of(relative)), target.stat())
    except FileNotFoundError as exc:
        raise ConfineError("not_found", f"{relative!r} does not exist") from exc
    except OSError as exc:
        raise ConfineError("refused", f"{relative!r}: {exc.strerror}") from exc


def list_dir(
    root: str | os.PathLike[str], relative: str = "", max_entries: int = MAX_LISTING_ENTRIES
) -> Listing:
    """The entries of a directory under `root` (symlinks listed as such, not followed), at
    most `max_entries` of them, by name."""
    target = resolve_inside(root, relative)
    prefix = "/".join(parts_of(relative))
    found: list[Entry] = []
    try:
        with os.scandir(target) as scan:
            for item in scan:
                if len(found) > max_entries:
                    break
                if not item.name.isprintable() and _undecodable(item.name):
                    continue  # a name that is not UTF-8 cannot be answered or asked for
                name = f"{prefix}/{item.name}" if prefix else item.name
                found.append(_entry(name, item.stat(follow_symlinks=False)))
    except FileNotFoundError as exc:
        raise ConfineError("not_found", f"{relative!r} does not exist") from exc
    except NotADirectoryError as exc:
        raise ConfineError("not_a_directory", f"{relative!r} is not a directory") from exc
    except OSError as exc:
        raise ConfineError("refused", f"{relative!r}: {exc.strerror}") from exc
    found.sort(key=lambda entry: entry.path)
    return Listing(prefix, found[:max_entries], len(found) > max_entries)


def open_file(root: str | os.PathLike[str], relative: str) -> tuple[int, os.stat_result]:
    """An open descriptor of the regular file `relative` under `root`, and its status; the
    caller closes it. A final symlink is never followed (it was resolved and checked)."""
    target = resolve_inside(root, relative)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(target, flags | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        raise ConfineError("not_found", f"{relative!r} does not exist") from exc
    except OSError as exc:
        raise ConfineError("refused", f"{relative!r}: {exc.strerror}") from exc
    try:
        _check_opened(fd, Path(os.path.realpath(root)), relative)
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfineError("not_a_file", f"{relative!r} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def _undecodable(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def read_file(root: str | os.PathLike[str], relative: str, max_bytes: int) -> bytes:
    """The content of a regular file under `root`; refused over `max_bytes` before reading."""
    fd, info = open_file(root, relative)
    try:
        if info.st_size > max_bytes:
            raise ConfineError("too_large", _too_large(relative, info.st_size, max_bytes))
        data = _read_up_to(fd, max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise ConfineError("too_large", f"{relative!r} grew past {max_bytes} bytes as it was read")
    return data


def _read_up_to(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    while size > 0 and (chunk := os.read(fd, min(size, 1 << 20))):
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _too_large(relative: str, size: int, limit: int) -> str:
    return f"{relative!r} is {size} bytes, over the limit of {limit} bytes"


def _check_opened(fd: int, base: Path, relative: str) -> None:
    """Where the system tells what an open descriptor is (Linux), it must be inside."""
    try:
        opened = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return
    if not inside(opened, base):
        raise ConfineError("refused", f"{relative!r} leads out of the case directory")
