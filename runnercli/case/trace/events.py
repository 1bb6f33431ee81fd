"""A case's trace events as the runner makes them; the wire model and its bounds are in
`runnercli.protocol.trace`. Parsers produce `Draft`s (no `seq` yet); `TraceBatcher`
numbers, redacts and bounds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runnercli.protocol.trace import (
    MAX_TRACE_BYTES,
    MAX_TRACE_BYTES_PER_CALL,
    MAX_TRACE_EVENT_BYTES,
    MAX_TRACE_EVENTS,
    MAX_TRACE_EVENTS_PER_CALL,
    MAX_TRACE_NAME_CHARS,
    TRACE_KINDS,
    TraceEvent,
    TraceKind,
    encode,
    now_ms,
)

__all__ = [
    "MAX_TRACE_BYTES",
    "MAX_TRACE_BYTES_PER_CALL",
    "MAX_TRACE_EVENTS",
    "MAX_TRACE_EVENTS_PER_CALL",
    "TRACE_KINDS",
    "Draft",
    "TraceEvent",
    "TraceKind",
    "bounded_data",
    "clip_text",
    "encode",
    "event_bytes",
    "event_from",
    "now_ms",
    "short_name",
]


@dataclass(frozen=True, slots=True)
class Draft:
    """An event before it is numbered: what a parser or the trace file yields."""

    kind: TraceKind
    name: str
    data: dict[str, Any] = field(default_factory=dict)
    ts: int = 0


def short_name(name: str) -> str:
    """A name cut to what an event carries, on one line."""
    name = " ".join(name.split())
    if len(name) <= MAX_TRACE_NAME_CHARS:
        return name
    return name[: MAX_TRACE_NAME_CHARS - 1] + "…"


def clip_text(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, saying so."""
    return text if len(text) <= limit else text[:limit] + "…"


def bounded_data(data: dict[str, Any], limit: int = MAX_TRACE_EVENT_BYTES) -> dict[str, Any]:
    """`data`, or a marker with the head of its JSON when it encodes to more than `limit`."""
    encoded = encode(data)
    if len(encoded) <= limit:
        return data
    text = encoded.decode()
    # The head is JSON text inside a JSON string: quotes and escapes may double it again.
    budget = limit // 2
    while True:
        marker = {"truncated": True, "bytes": len(encoded), "head": text[:budget] + "…"}
        if len(encode(marker)) <= limit or budget == 0:
            return marker
        budget //= 2


def event_from(seq: int, draft: Draft, limit: int = MAX_TRACE_EVENT_BYTES) -> TraceEvent:
    """The numbered, bounded event of a draft."""
    return TraceEvent(
        seq=seq,
        ts=max(0, draft.ts),
        kind=draft.kind,
        name=short_name(draft.name),
        data=bounded_data(draft.data, limit),
    )


def event_bytes(event: TraceEvent) -> int:
    return len(encode(event.model_dump(mode="json")))
