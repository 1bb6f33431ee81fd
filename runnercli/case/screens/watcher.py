"""`$EVERDICT_SCREEN_DIR`: the frames a harness writes, newest first, at most one per interval.

A frame is a PNG or JPEG by its first bytes, never its name (`runnercli.protocol.images`).
Only the newest frame written since the last one taken goes; older ones are never sent. A
file still being written — its size or time changing while it is read, or an image without
its end (PNG `IEND`, JPEG `EOI`) — waits for a later look; one over the size limit, or not
an image, is skipped with a reason. Symbolic links are not followed: the directory's own
files only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from runnercli.protocol.images import PNG_SIGNATURE, is_whole, media_type
from runnercli.protocol.trace import now_ms

SCREEN_INTERVAL_MS = 1000
MAX_SCREEN_BYTES = 512 * 1024
# How many of the newest files one look tries when the newest is still being written.
TRIES = 3


@dataclass(frozen=True, slots=True)
class Frame:
    name: str
    media_type: str
    data: bytes
    taken_at: int  # epoch ms: when the harness wrote it


@dataclass(frozen=True, slots=True)
class Skipped:
    name: str
    reason: str


@dataclass(frozen=True, slots=True, order=True)
class _Seen:
    mtime_ns: int
    name: str
    size: int


class ScreenWatcher:
    """Hands out the newest unsent frame of a directory, at most once per `interval_ms`."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        interval_ms: int = SCREEN_INTERVAL_MS,
        max_bytes: int = MAX_SCREEN_BYTES,
    ) -> None:
        self.directory = Path(directory)
        self.interval_ms = interval_ms
        self.max_bytes = max_bytes
        self._taken_at: int | None = None
        # The newest file handed out or skipped: only files written after it are candidates.
        self._last: tuple[int, str] | None = None

    def poll(self, now: int | None = None) -> Frame | Skipped | None:
        """The frame to send now, a file skipped (once, with why), or None."""
        at = now_ms() if now is None else now
        if self._taken_at is not None and at - self._taken_at < self.interval_ms:
            return None
        for seen in self._candidates()[:TRIES]:
            outcome = self._look(seen)
            if outcome is None:
                continue  # still being written: an older whole frame may go meanwhile
            self._last = (seen.mtime_ns, seen.name)
            if isinstance(outcome, Frame):
                self._taken_at = at
            return outcome
        return None

    def _candidates(self) -> list[_Seen]:
        """Regular files written after the last one taken, newest first."""
        found: list[_Seen] = []
        try:
            entries = list(os.scandir(self.directory))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            return []
        for entry in entries:
            try:
                if not entry.is_file(follow_symlinks=False):
                    continue
                stat = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if self._last is None or (stat.st_mtime_ns, entry.name) > self._last:
                found.append(_Seen(stat.st_mtime_ns, entry.name, stat.st_size))
        return sorted(found, reverse=True)

    def _look(self, seen: _Seen) -> Frame | Skipped | None:
        if seen.size > self.max_bytes:
            return Skipped(seen.name, f"{seen.size} bytes, over the limit of {self.max_bytes}")
        try:
            data, after = self._read(self.directory / seen.name)
        except OSError:
            return None
        unchanged = (after.st_size, after.st_mtime_ns) == (seen.size, seen.mtime_ns)
        if not unchanged or len(data) != seen.size:
            return None  # written to while it was read
        kind = media_type(data)
        if kind is None:
            if len(data) < len(PNG_SIGNATURE):
                return None  # too short yet to tell
            return Skipped(seen.name, "not a PNG or JPEG (by its first bytes)")
        if not is_whole(data, kind):
            return None
        return Frame(seen.name, kind, data, seen.mtime_ns // 1_000_000)

    def _read(self, path: Path) -> tuple[bytes, os.stat_result]:
        """The file's bytes, and its state once they were read (a link is never followed)."""
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(self.max_bytes + 1)
            return data, os.fstat(handle.fileno())
