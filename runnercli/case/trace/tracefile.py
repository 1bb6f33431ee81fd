"""`$EVERDICT_TRACE_FILE`: JSON lines the harness appends, followed as the file grows.

Each line is `{"kind", "name", "data", "ts"?}` (`ts` in epoch milliseconds, else when the
line was read). The runner numbers the events itself: a `seq` in the file is ignored. Other
keys are kept in `data`. A kind the runner does not know (or `dropped`, which is the
runner's) makes the line a `raw` event.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

from runnercli.case.trace.events import TRACE_KINDS, Draft, TraceKind, now_ms
from runnercli.case.trace.lines import JsonLinesParser

HARNESS_KINDS = TRACE_KINDS - {"dropped"}
LINE_KEYS = frozenset({"kind", "name", "data", "ts", "seq"})
# What one look at the file reads at most; the rest waits for the next.
MAX_READ_BYTES = 4 * 1024 * 1024


class TraceLineParser(JsonLinesParser):
    """The trace file's lines as drafts."""

    def on_object(self, obj: dict[str, Any], ts: int) -> list[Draft]:
        kind = obj.get("kind")
        if kind not in HARNESS_KINDS:
            error = {"error": f"unknown kind {kind!r}", "event": obj}
            return [Draft("raw", "trace-file", error, ts)]
        data = obj.get("data", {})
        data = dict(data) if isinstance(data, dict) else {"value": data}
        for key in obj.keys() - LINE_KEYS:
            data.setdefault(key, obj[key])
        name = obj.get("name", "")
        name = name if isinstance(name, str) else str(name)
        return [Draft(cast(TraceKind, kind), name, data, _ts(obj, ts))]


def _ts(obj: dict[str, Any], arrived: int) -> int:
    value = obj.get("ts")
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return int(value)
    return arrived


class TraceFileFollower:
    """Reads what was appended to the trace file since the last look.

    A file that does not exist yet is no event; a partial last line waits for its newline; a
    file truncated or replaced is read again from its start (saying so in a `raw` event).
    """

    def __init__(self, path: str | os.PathLike[str], max_read_bytes: int = MAX_READ_BYTES):
        self.path = Path(path)
        self.max_read_bytes = max_read_bytes
        self._offset = 0
        self._identity: tuple[int, int] | None = None
        self._parser = TraceLineParser()

    def poll(self, ts: int | None = None) -> list[Draft]:
        """Drafts of the lines completed since the last look."""
        at = now_ms() if ts is None else ts
        try:
            with self.path.open("rb") as handle:
                drafts = self._restart_if_rewritten(os.fstat(handle.fileno()), at)
                handle.seek(self._offset)
                chunk = handle.read(self.max_read_bytes)
        except (FileNotFoundError, IsADirectoryError, PermissionError):
            return []
        self._offset += len(chunk)
        return drafts + self._parser.feed(chunk, at)

    def finish(self, ts: int | None = None) -> list[Draft]:
        """Everything left, the last line included when the harness wrote no newline."""
        at = now_ms() if ts is None else ts
        drafts = self.poll(at)
        while self._unread():
            before = self._offset
            drafts += self.poll(at)
            if self._offset == before:
                break
        return drafts + self._parser.finish(at)

    def _unread(self) -> bool:
        try:
            return self.path.stat().st_size > self._offset
        except OSError:
            return False

    def _restart_if_rewritten(self, stat: os.stat_result, ts: int) -> list[Draft]:
        identity = (stat.st_dev, stat.st_ino)
        if identity == self._identity and stat.st_size >= self._offset:
            return []
        seen_before = self._identity is not None
        self._identity, self._offset, self._parser = identity, 0, TraceLineParser()
        if not seen_before:
            return []
        note = "the trace file was truncated or replaced: read again from its start"
        return [Draft("raw", "trace-file", {"error": note}, ts)]
