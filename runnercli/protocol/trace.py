"""A case's trace on the wire (protocol 3): its events and the bounds each side keeps.

An event is `{seq, ts, kind, name, data}`: `seq` counts from 0 per case with no gap (the
server stores each `(attempt, seq)` once, so a batch sent twice stores nothing twice), `ts`
is epoch milliseconds, `name` a short label (a tool's name, a role) and `data` a JSON object.
"""

from __future__ import annotations

import json
import time
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
    """Now, as an event's `ts` says it: epoch milliseconds."""
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
