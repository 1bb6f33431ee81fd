"""What the harness writes, bounded as it streams: stdout's head, stderr's tail and lines.

Each stream is also handed, as it comes, to whoever observes it (`CaseContext.stdout_chunks`,
`CaseContext.stderr_lines`): the case's log, and any stage that follows the harness.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from runnercli.protocol import MAX_LOG_LINE_BYTES, MAX_OUTPUT_BYTES, MAX_STDERR_TAIL_BYTES
from runnercli.text.utf8 import clip_utf8, utf8_cut

LineSink = Callable[[str], None]
# Called with each chunk as it is read, then once with b"" when the stream ends.
ChunkSink = Callable[[bytes], None]


@dataclass
class Lines:
    """Bytes in, lines out to `sinks`: each at most `limit` bytes (a longer line comes in
    pieces, cut between characters), the last one when the stream ends (`b""`)."""

    sinks: list[LineSink]
    limit: int = MAX_LOG_LINE_BYTES
    partial: bytearray = field(default_factory=bytearray)

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            self.close()
            return
        self.partial += chunk
        *lines, rest = self.partial.split(b"\n")
        for line in lines:
            self._emit(line)
        self.partial = bytearray(rest)
        # A line with no end in sight is still shown, in pieces, and never grows unbounded.
        while len(self.partial) > self.limit:
            cut = utf8_cut(self.partial, self.limit)
            self._emit(self.partial[:cut])
            del self.partial[:cut]

    def close(self) -> None:
        if self.partial:
            self._emit(self.partial)
            self.partial = bytearray()

    def _emit(self, line: bytes | bytearray) -> None:
        """Hand one line to the sinks, in pieces of at most `limit` bytes."""
        rest = bytes(line).rstrip(b"\r")
        while True:
            cut = utf8_cut(rest, self.limit)
            text = clip_utf8(rest[:cut].decode("utf-8", errors="replace"), self.limit)
            for sink in self.sinks:
                sink(text)
            rest = rest[cut:]
            if not rest:
                return


@dataclass
class Stdout:
    """The first MAX_OUTPUT_BYTES of stdout; the rest is read and dropped, never blocking."""

    observers: list[ChunkSink] = field(default_factory=list)
    data: bytearray = field(default_factory=bytearray)
    total: int = 0

    def feed(self, chunk: bytes) -> None:
        room = MAX_OUTPUT_BYTES - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        self.total += len(chunk)
        for observer in self.observers:
            observer(chunk)

    def close(self) -> None:
        for observer in self.observers:
            observer(b"")

    def text(self) -> str:
        return clip_utf8(self.data.decode("utf-8", errors="replace"), MAX_OUTPUT_BYTES)


@dataclass
class Stderr:
    """The last MAX_STDERR_TAIL_BYTES of stderr, and each line handed to `sinks` as it comes."""

    sinks: list[LineSink] = field(default_factory=list)
    tail: bytearray = field(default_factory=bytearray)

    def __post_init__(self) -> None:
        self.lines = Lines(self.sinks)

    def feed(self, chunk: bytes) -> None:
        self.tail += chunk
        if len(self.tail) > MAX_STDERR_TAIL_BYTES:
            del self.tail[: len(self.tail) - MAX_STDERR_TAIL_BYTES]
        self.lines.feed(chunk)

    def close(self) -> None:
        self.lines.close()

    def text(self) -> str:
        decoded = self.tail.decode("utf-8", errors="replace")
        return clip_utf8(decoded, MAX_STDERR_TAIL_BYTES, keep_tail=True)
