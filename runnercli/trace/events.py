"""A case's trace events: the wire model, and the bounds every event and every case keeps.

An event is `{seq, ts, kind, name, data}`: `seq` counts from 0 per case with no gap (the
server stores each `(attempt, seq)` once, so a batch sent twice stores nothing twice), `ts`
is epoch milliseconds, `name` a short label (a tool's name, a role) and `data` a JSON object.
Parsers produce `Draft`s (no `seq` yet); `TraceBatcher` numbers, redacts and bounds them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

TraceKind = Literal["message", "tool_call", "tool_result", "usage", "error", "raw", "dropped"]
TRACE_KINDS: frozenset[str] = frozenset(get_args(TraceKind))

# Per case: past either bound one `dropped` event says how many were left out.
MAX_TRACE_EVENTS = 20_000
MAX_TRACE_BYTES = 16 * 1024 * 1024
# One event, encoded as compact JSON: past it, `data` becomes a truncation marker.
MAX_TRACE_EVENT_BYTES = 64 * 1024
MAX_TRACE_NAME_CHARS = 100
# What one `report_case_trace` call carries.
MAX_TRACE_EVENTS_PER_CALL = 200
MAX_TRACE_BYTES_PER_CALL = 256 * 1024


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def encode(value: Any) -> bytes:
    """Compact JSON, as the event is measured and sent."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


class TraceEvent(BaseModel):
    """One step of a case as the server receives it (`report_case_trace`)."""

    model_config = ConfigDict(extra="forbid")

    seq: int = Field(ge=0)
    ts: int = Field(ge=0)
    kind: TraceKind
    name: str = Field(default="", max_length=MAX_TRACE_NAME_CHARS)
    data: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _bounded(self) -> TraceEvent:
        try:
            size = len(encode(self.data))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"data is not JSON: {exc}") from exc
        if size > MAX_TRACE_EVENT_BYTES:
            raise ValueError(f"data is {size} bytes, over {MAX_TRACE_EVENT_BYTES}")
        return self


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
