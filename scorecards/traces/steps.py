"""What a trace says as it grows: the case's current step and what it has spent so far.

The state is a small JSON object kept on the attempt's `CaseTrace` row and advanced with each
batch stored, so the run page reads one row per running case, never its events:

- `open`: the tool calls not answered yet, oldest first (`[id, name, label, ts]`), bounded;
- `last`: the latest activity when no call is open ("thinking", "writing", "done", …);
- `totals`: tool calls, errors, events kept `raw` (lines the parser does not know), tokens and
  cost (`usage` events are summed; Claude's final
  `result` event carries the session's own totals, which then stand).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from runnercli.protocol import TraceEvent
from runnercli.protocol.steps import short_argument

MAX_OPEN_CALLS = 32
TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
COST_FIELDS = ("total_cost_usd", "cost_usd")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def call_label(name: str, data: dict[str, Any]) -> str:
    """ "Bash `npm test`": a call's tool and its most telling argument."""
    argument = short_argument(data)
    return f"{name} `{argument}`" if argument else name


def _activity(event: TraceEvent) -> str | None:
    if event.kind == "raw":
        return None
    if event.kind == "message" and event.name == "assistant":
        return "writing"
    if event.kind == "usage" and event.name == "result":
        return "done"
    if event.kind == "error":
        return f"error: {event.name}"
    return "thinking"


def _spent(totals: dict[str, Any], event: TraceEvent) -> None:
    nested = event.data.get("usage")
    sources = [event.data, nested] if isinstance(nested, dict) else [event.data]
    found: dict[str, float] = {}
    for source in sources:
        for field in (*TOKEN_FIELDS, *COST_FIELDS):
            number = _number(source.get(field))
            if number is not None:
                found.setdefault("cost_usd" if field in COST_FIELDS else field, number)
    if not found:
        return
    final = event.name == "result"
    if totals.get("final") and not final:
        return
    for field, number in found.items():
        kept = number if final else totals.get(field, 0) + number
        totals[field] = round(kept, 9) if field == "cost_usd" else int(kept)
    totals["final"] = totals.get("final", False) or final


def _close(open_calls: list[list[Any]], event: TraceEvent) -> None:
    call_id = event.data.get("call_id")
    ids = [call[0] for call in open_calls]
    if call_id is not None and str(call_id) in ids:
        del open_calls[ids.index(str(call_id))]
        return
    # No id to pair by (a harness's own trace file): the newest open call of that name.
    for index in range(len(open_calls) - 1, -1, -1):
        if open_calls[index][1] == event.name:
            del open_calls[index]
            return


def advance(state: dict[str, Any], events: Iterable[TraceEvent]) -> dict[str, Any]:
    """The state after these events (in seq order); `state` is left as it was."""
    open_calls = [list(c) for c in state.get("open", [])]
    totals = dict(state.get("totals", {}))
    last, last_ts = state.get("last", "starting"), state.get("last_ts")
    for event in events:
        if event.kind == "tool_call":
            call_id = str(event.data.get("id") or f"#{event.seq}")
            open_calls.append([call_id, event.name, call_label(event.name, event.data), event.ts])
            del open_calls[:-MAX_OPEN_CALLS]
            totals["tool_calls"] = totals.get("tool_calls", 0) + 1
        elif event.kind == "tool_result":
            _close(open_calls, event)
            if event.data.get("is_error"):
                totals["tool_errors"] = totals.get("tool_errors", 0) + 1
        elif event.kind == "error":
            totals["errors"] = totals.get("errors", 0) + 1
        elif event.kind == "raw":
            # A line the runner's parser did not know (a CLI's stream changed), kept whole.
            totals["raw"] = totals.get("raw", 0) + 1
        elif event.kind == "usage":
            _spent(totals, event)
        if (activity := _activity(event)) is not None:
            last, last_ts = activity, event.ts
    return {"open": open_calls, "last": last, "last_ts": last_ts, "totals": totals}


def current_step(state: dict[str, Any]) -> dict[str, Any]:
    """`{label, since}`: the newest open call and when it started, else the last activity."""
    open_calls = state.get("open") or []
    if open_calls:
        _, _, label, since = open_calls[-1]
        return {"label": label, "since": since, "open": True}
    return {"label": state.get("last", "starting"), "since": state.get("last_ts"), "open": False}
