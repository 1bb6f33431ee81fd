"""The files a case leaves behind, named by its harness's `artifacts` globs.

Globs are relative to the case's directory and use `/`: `*` and `?` within one path
component (names starting with `.` included), `[abc]` / `[!abc]`, and `**` as a whole
component for any number of directories (`out/**/*.json`). A glob that could reach outside
the directory (absolute, a drive letter, `..`) is refused, by the same rule on the server
when a harness is stored. Collection walks the directory without following symlinks (a
symlink matched is left out, saying so), skips `.git`, and hashes each file in chunks; a
file over the per-file limit, or past the case's total, is left out with the reason.
"""

from __future__ import annotations

import hashlib
import mimetypes
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import re2

from runnercli.case.confine import ConfineError, open_file
from runnercli.protocol.names import check_globs

# Entries looked at before collection gives up walking (a case that wrote a million files).
MAX_SCANNED_ENTRIES = 200_000
HASH_CHUNK = 1 << 20
DEFAULT_MEDIA_TYPE = "application/octet-stream"
_MAGIC = re.compile(r"[*?\[]")


@dataclass(frozen=True)
class Artifact:
    path: str  # relative to the case directory, `/`-separated
    size: int
    sha256: str
    media_type: str
    source: Path  # where it is on this machine, to upload from

    def to_wire(self) -> dict[str, Any]:
        """What a result names: `{path, sha256, size, media_type}`."""
        return {
            "path": self.path,
            "sha256": self.sha256,
            "size": self.size,
            "media_type": self.media_type,
        }


@dataclass(frozen=True)
class Skipped:
    path: str
    reason: str


@dataclass
class Collected:
    artifacts: list[Artifact] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)  # globs that matched no file
    scan_cut: bool = False  # the walk stopped at MAX_SCANNED_ENTRIES

    @property
    def total_bytes(self) -> int:
        return sum(artifact.size for artifact in self.artifacts)


def glob_regex(glob: str) -> str:
    """The regular expression (RE2, matched against a whole `/`-separated path) of a glob."""
    parts = glob.split("/")
    pieces = []
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            pieces.append(".+" if last else "(?:[^/]+/)*")
        else:
            pieces.append(_part_regex(part) + ("" if last else "/"))
    return "".join(pieces)


def _part_regex(part: str) -> str:
    out, index = [], 0
    while index < len(part):
        char = part[index]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = part.index("]", index + 2)
            body = part[index + 1 : end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            escaped = "".join(c if c == "-" else re.escape(c) for c in body)
            out.append(f"[{'^/' if negate else ''}{escaped}]")
            index = end
        else:
            out.append(re.escape(char))
        index += 1
    return "".join(out)


@dataclass(frozen=True)
class Glob:
    text: str
    regex: Any
    literal: tuple[str, ...]  # the leading components without wildcards
    depth: int | None  # components a match has; None with `**`

    @classmethod
    def of(cls, text: str) -> Glob:
        parts = text.split("/")
        literal: list[str] = []
        for part in parts[:-1]:
            if _MAGIC.search(part):
                break
            literal.append(part)
        options = re2.Options()
        options.log_errors = False
        depth = None if "**" in parts else len(parts)
        return cls(text, re2.compile(glob_regex(text), options), tuple(literal), depth)

    def may_hold(self, directory: tuple[str, ...]) -> bool:
        """Whether a file under `directory` could match (so the walk goes into it)."""
        common = min(len(directory), len(self.literal))
        if directory[:common] != self.literal[:common]:
            return False
        return self.depth is None or len(directory) < self.depth

    def matches(self, path: str) -> bool:
        return self.regex.fullmatch(path) is not None


def media_type(path: str) -> str:
    return mimetypes.guess_type(path, strict=False)[0] or DEFAULT_MEDIA_TYPE


def collect(
    root: str | os.PathLike[str],
    globs: Sequence[str],
    max_file_bytes: int,
    max_total_bytes: int,
) -> Collected:
    """The files under `root` that `globs` match, in path order, hashed, within the limits."""
    compiled = [Glob.of(glob) for glob in check_globs(globs)]
    base = Path(os.path.realpath(root))
    collected = Collected()
    matched: dict[str, os.stat_result] = {}
    hit: set[str] = set()
    for path, info in _walk(base, compiled, collected):
        shown = _shown(path)
        found = [glob.text for glob in compiled if glob.matches(shown)]
        hit.update(found)
        if found and shown != path:
            collected.skipped.append(Skipped(shown, "its name is not UTF-8"))
        elif found:
            matched[path] = info
    collected.unmatched = [glob for glob in globs if glob not in hit]
    for path in sorted(matched):
        problem = _take(base, path, matched[path], collected, max_file_bytes, max_total_bytes)
        if problem:
            collected.skipped.append(Skipped(path, problem))
    return collected


def _walk(
    base: Path, globs: list[Glob], collected: Collected
) -> Iterator[tuple[str, os.stat_result]]:
    """Every non-directory entry under `base` in a directory some glob may reach; symlinks
    are reported as such, never followed."""
    scanned = 0
    pending: list[tuple[str, ...]] = [()]
    while pending:
        parts = pending.pop()
        try:
            entries = list(os.scandir(base.joinpath(*parts)))
        except OSError:
            continue
        for entry in entries:
            scanned += 1
            if scanned > MAX_SCANNED_ENTRIES:
                collected.scan_cut = True
                return
            if entry.name == ".git":
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            child = (*parts, entry.name)
            if not stat.S_ISDIR(info.st_mode):
                yield "/".join(child), info
            elif any(glob.may_hold(child) for glob in globs):
                pending.append(child)


def _take(
    base: Path,
    path: str,
    info: os.stat_result,
    collected: Collected,
    max_file_bytes: int,
    max_total_bytes: int,
) -> str | None:
    """Add the file at `path` to `collected`, or say why it is left out."""
    if stat.S_ISLNK(info.st_mode):
        return "a symlink: not followed"
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_size > max_file_bytes:
        return f"{info.st_size} bytes, over the limit of {max_file_bytes} bytes per file"
    room = max_total_bytes - collected.total_bytes
    if info.st_size > room:
        return f"{info.st_size} bytes, past the case's limit of {max_total_bytes} bytes in all"
    try:
        digest, size = _hash(base, path, min(max_file_bytes, room))
    except ConfineError as exc:
        return f"could not be read: {exc}"
    except OSError as exc:
        return f"could not be read: {exc.strerror}"
    if size is None:
        return "it grew past the limits while it was read"
    collected.artifacts.append(Artifact(path, size, digest, media_type(path), base / path))
    return None


def _shown(path: str) -> str:
    """The path itself, or for a name the file system gave as bytes that are not UTF-8
    (surrogate escapes), a readable stand-in with U+FFFD."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return path


def _hash(base: Path, path: str, limit: int) -> tuple[str, int | None]:
    """The file's SHA-256 and size, read in chunks; size None when it holds over `limit`."""
    fd, _ = open_file(base, path)
    digest, size = hashlib.sha256(), 0
    try:
        while chunk := os.read(fd, HASH_CHUNK):
            size += len(chunk)
            if size > limit:
                return digest.hexdigest(), None
            digest.update(chunk)
    finally:
        os.close(fd)
    return digest.hexdigest(), size
