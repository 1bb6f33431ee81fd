"""Recorded agent sessions (tests/runnercli/fixtures) fed to the trace parsers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from runnercli.case.trace import Draft, StreamParser

FIXTURES = Path(__file__).parent / "fixtures"
T0 = 1_760_000_000_000  # epoch ms


def recorded_lines(name: str) -> list[bytes]:
    """The stream's lines as the agent printed them (the fixture's `#` note left out)."""
    text = (FIXTURES / name).read_bytes()
    return [line + b"\n" for line in text.splitlines() if not line.startswith(b"#")]


def feed_at(
    parser: StreamParser, lines: Sequence[bytes], offsets_s: Sequence[float]
) -> list[Draft]:
    """Feed each line as it arrived `offsets_s[i]` seconds after T0."""
    assert len(lines) == len(offsets_s)
    drafts: list[Draft] = []
    for line, offset in zip(lines, offsets_s, strict=True):
        drafts += parser.feed(line, T0 + int(offset * 1000))
    return drafts + parser.finish(T0 + int(offsets_s[-1] * 1000))


def every_split(parser_type: type, stream: bytes) -> list[tuple[int, list[Draft]]]:
    """The drafts of `stream` fed in two chunks, for every split point (all at T0)."""
    found = []
    for cut in range(len(stream) + 1):
        parser = parser_type()
        drafts = parser.feed(stream[:cut], T0) + parser.feed(stream[cut:], T0)
        found.append((cut, drafts + parser.finish(T0)))
    return found
