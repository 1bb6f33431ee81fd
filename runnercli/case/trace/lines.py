"""JSON lines fed as bytes arrive: whole lines out, whatever the chunks, bounded in memory."""

from __future__ import annotations

import json
from typing import Any

from runnercli.case.trace.events import Draft, clip_text, now_ms

# A line longer than this is not parsed: its head is kept as a `raw` event.
MAX_LINE_BYTES = 16 * 1024 * 1024
# How much of a line that could not be parsed a `raw` event keeps.
RAW_LINE_CHARS = 4096


class LineBuffer:
    """Splits a byte stream into lines; a line split across chunks comes out whole."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self._partial = bytearray()
        # Bytes of the current line left out past `max_line_bytes`.
        self._overflow = 0

    def feed(self, chunk: bytes) -> list[tuple[bytes, int]]:
        """Complete lines in `chunk` (without their newline), each with its length in bytes."""
        lines: list[tuple[bytes, int]] = []
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            self._keep(chunk[start:end])
            lines.append(self._take())
            start = end + 1
        self._keep(chunk[start:])
        return lines

    def flush(self) -> list[tuple[bytes, int]]:
        """The last line when the stream ended without a newline."""
        if not self._partial and not self._overflow:
            return []
        return [self._take()]

    def _keep(self, piece: bytes) -> None:
        room = self.max_line_bytes - len(self._partial)
        self._partial += piece[: max(0, room)]
        self._overflow += max(0, len(piece) - max(0, room))

    def _take(self) -> tuple[bytes, int]:
        line, size = bytes(self._partial), len(self._partial) + self._overflow
        self._partial.clear()
        self._overflow = 0
        if line.endswith(b"\r"):
            line = line[:-1]
        return line, size


def raw_line(error: str, line: str, size: int | None = None) -> dict[str, Any]:
    """The data of a `raw` event for a line that could not be read as an event."""
    data: dict[str, Any] = {"error": error, "line": clip_text(line, RAW_LINE_CHARS)}
    if size is not None:
        data["bytes"] = size
    return data


class JsonLinesParser:
    """Feed bytes, get drafts: one JSON object per line, handed to `on_object`.

    A line that is not a JSON object becomes a `raw` event carrying the parse error and the
    line's head; a blank line is skipped. Subclasses map objects to drafts.
    """

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._lines = LineBuffer(max_line_bytes)

    def feed(self, chunk: bytes, ts: int | None = None) -> list[Draft]:
        """Drafts of the lines `chunk` completes; `ts` (epoch ms) is when it arrived."""
        at = now_ms() if ts is None else ts
        return self._parse(self._lines.feed(chunk), at)

    def finish(self, ts: int | None = None) -> list[Draft]:
        """Drafts of a last line without a newline, once the stream has ended."""
        at = now_ms() if ts is None else ts
        return self._parse(self._lines.flush(), at)

    def _parse(self, lines: list[tuple[bytes, int]], ts: int) -> list[Draft]:
        drafts: list[Draft] = []
        for line, size in lines:
            drafts.extend(self._parse_line(line, size, ts))
        return drafts

    def _parse_line(self, line: bytes, size: int, ts: int) -> list[Draft]:
        text = line.decode(errors="replace")
        if size > len(line):
            error = f"line of {size} bytes, over {self._lines.max_line_bytes}"
            return [Draft("raw", "line", raw_line(error, text, size), ts)]
        if not text.strip():
            return []
        try:
            value = json.loads(text)
        except ValueError as exc:
            return [Draft("raw", "line", raw_line(f"not JSON: {exc}", text), ts)]
        if not isinstance(value, dict):
            return [Draft("raw", "line", raw_line("not a JSON object", text), ts)]
        return self.on_object(value, ts)

    def on_object(self, obj: dict[str, Any], ts: int) -> list[Draft]:
        raise NotImplementedError
