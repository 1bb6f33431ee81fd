"""An attempt's trace written within its bounds (`EVERDICT_MAX_TRACE_EVENTS`,
`EVERDICT_MAX_TRACE_BYTES`): past either one nothing more is kept, and one `dropped` event —
at the seq of the first event left out — says how many were, its count kept current. A
runner's own `dropped` event (its bounds cut first) adds the count it carries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runnercli.protocol import TraceEvent, encode
from scorecards.traces.models import CaseTrace
from scorecards.traces.models import TraceEvent as StoredEvent

# Room kept under the byte bound for the `dropped` event itself.
MARKER_RESERVE_BYTES = 512


def event_size(event: TraceEvent) -> int:
    return len(encode(event.model_dump(mode="json")))


def marker_data(dropped: int) -> dict[str, Any]:
    noun = "event" if dropped == 1 else "events"
    return {"message": f"… {dropped:,} {noun} dropped", "count": dropped}


def _storable(value: Any) -> Any:
    # PostgreSQL's jsonb cannot hold NUL in a string: a harness echoing binary keeps its trace.
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_storable(k): _storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_storable(v) for v in value]
    return value


def _stands_for(event: TraceEvent) -> int:
    """How many events one left out stands for: a runner's `dropped` event, its count."""
    count = event.data.get("count")
    if event.kind == "dropped" and isinstance(count, int) and not isinstance(count, bool):
        return max(1, count)
    return 1


class TraceWriter:
    """Writes contiguous new events of one attempt's trace (its job row locked by the caller)."""

    def __init__(self, trace: CaseTrace, *, max_events: int, max_bytes: int) -> None:
        self.trace = trace
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.rows: list[StoredEvent] = []
        self.marker: StoredEvent | None = None

    def write(self, events: Sequence[TraceEvent]) -> None:
        trace, dropped_before = self.trace, self.trace.dropped
        for event in events:
            size = event_size(event)
            if self._fits(event, size):
                self._keep(event, size)
            else:
                self._drop(event)
            trace.last_seq = event.seq
            trace.first_ts = event.ts if trace.first_ts is None else min(trace.first_ts, event.ts)
            trace.last_ts = event.ts if trace.last_ts is None else max(trace.last_ts, event.ts)
        if trace.dropped != dropped_before:
            self._mark()
        StoredEvent.objects.bulk_create(self.rows)

    def _fits(self, event: TraceEvent, size: int) -> bool:
        trace = self.trace
        if trace.dropped:
            return False  # once cut, always cut: the trace stops at a point
        if event.kind == "dropped":
            # The runner's own last word about its bounds: it has its reserved place.
            return trace.kept < self.max_events and trace.bytes + size <= self.max_bytes
        within_count = trace.kept < self.max_events - 1
        return within_count and trace.bytes + size <= self.max_bytes - MARKER_RESERVE_BYTES

    def _keep(self, event: TraceEvent, size: int) -> None:
        self.rows.append(
            StoredEvent(
                attempt_id=self.trace.pk,
                seq=event.seq,
                ts=event.ts,
                kind=event.kind,
                name=_storable(event.name),
                data=_storable(event.data),
                size=size,
            )
        )
        self.trace.kept += 1
        self.trace.bytes += size

    def _drop(self, event: TraceEvent) -> None:
        trace = self.trace
        if trace.marker_seq is None:
            self.marker = StoredEvent(
                attempt_id=trace.pk, seq=event.seq, ts=event.ts, kind="dropped", name="dropped"
            )
            self.rows.append(self.marker)
            trace.marker_seq = event.seq
            trace.kept += 1
        trace.dropped += _stands_for(event)

    def _mark(self) -> None:
        data = marker_data(self.trace.dropped)
        if self.marker is not None:
            self.marker.data = data
            self.marker.size = len(encode(data))
            return
        seq = self.trace.marker_seq
        assert seq is not None
        StoredEvent.objects.filter(attempt_id=self.trace.pk, seq=seq).update(data=data)
