"""A case's trace on its way to the server: numbered, redacted, bounded, sent in batches.

Every event is kept until the server acknowledges it (`report_case_trace` answers
`last_seq`), so a batch lost with a dropped connection, or refused while the lease was
being resumed, goes again with exactly the events the server has not stored; the server
stores each seq once, so a batch that arrived twice stores nothing twice.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from runnercli.case.trace.events import (
    MAX_TRACE_BYTES,
    MAX_TRACE_BYTES_PER_CALL,
    MAX_TRACE_EVENT_BYTES,
    MAX_TRACE_EVENTS,
    MAX_TRACE_EVENTS_PER_CALL,
    Draft,
    TraceEvent,
    event_bytes,
    event_from,
    now_ms,
)

Redactor = Callable[[str], str]
# Room kept under the byte bound for the `dropped` event itself.
DROPPED_RESERVE_BYTES = 512
# A batch's JSON around its events (`{"events": [...]}` and the commas).
BATCH_OVERHEAD_BYTES = 64


def redacted(value: Any, redact: Redactor) -> Any:
    """`value` with `redact` applied to every string in it, keys included."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redacted(k, redact): redacted(v, redact) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redacted(v, redact) for v in value]
    return value


class TraceBatcher:
    """The events of one case, from drafts to acknowledged batches."""

    def __init__(
        self,
        *,
        redact: Redactor | None = None,
        max_events: int = MAX_TRACE_EVENTS,
        max_bytes: int = MAX_TRACE_BYTES,
        max_event_bytes: int = MAX_TRACE_EVENT_BYTES,
        batch_events: int = MAX_TRACE_EVENTS_PER_CALL,
        batch_bytes: int = MAX_TRACE_BYTES_PER_CALL,
    ) -> None:
        self.redact = redact
        self.max_events, self.max_bytes = max_events, max_bytes
        self.max_event_bytes = max_event_bytes
        self.batch_events, self.batch_bytes = batch_events, batch_bytes
        self.next_seq = 0
        self.recorded_bytes = 0
        self.acked_seq = -1
        self.dropped = 0
        self.dropped_bytes = 0
        self._cut = False
        self._finished = False
        # Recorded and not yet acknowledged, in seq order, each with its encoded size.
        self._pending: deque[tuple[TraceEvent, int]] = deque()

    def add(self, drafts: Iterable[Draft]) -> list[TraceEvent]:
        """Number, redact and bound `drafts`; return the events kept (as they will be sent)."""
        kept: list[TraceEvent] = []
        for draft in drafts:
            event = self._record(draft)
            if event is not None:
                kept.append(event)
        return kept

    def finish(self, ts: int | None = None) -> list[TraceEvent]:
        """Close the trace: the one `dropped` event, when the bounds left events out."""
        if self._finished:
            return []
        self._finished = True
        if not self.dropped:
            return []
        text = f"… {self.dropped:,} events dropped"
        data = {"message": text, "count": self.dropped, "bytes": self.dropped_bytes}
        at = now_ms() if ts is None else ts
        event = TraceEvent(seq=self.next_seq, ts=at, kind="dropped", name="dropped", data=data)
        self._keep(event, event_bytes(event))
        return [event]

    def resume(self, events: Iterable[TraceEvent]) -> None:
        """Take events numbered earlier, as they are (a trace kept on disk, sent again), and
        close the trace: nothing is added after them."""
        for event in events:
            if not self._pending and self.acked_seq < 0:
                self.acked_seq = event.seq - 1
            self._keep(event, event_bytes(event))
            self.next_seq = event.seq + 1
        self._finished = True

    def next_batch(self) -> list[TraceEvent]:
        """The oldest unacknowledged events, at most `batch_events` and about `batch_bytes`."""
        batch: list[TraceEvent] = []
        size = BATCH_OVERHEAD_BYTES
        for event, event_size in self._pending:
            if batch and (len(batch) >= self.batch_events or size + event_size > self.batch_bytes):
                break
            batch.append(event)
            size += event_size + 1
        return batch

    def acknowledge(self, last_seq: int) -> None:
        """The server holds every event up to `last_seq`: forget them."""
        self.acked_seq = max(self.acked_seq, last_seq)
        while self._pending and self._pending[0][0].seq <= self.acked_seq:
            self._pending.popleft()

    def pending(self) -> list[TraceEvent]:
        """Every event recorded and not acknowledged yet, in seq order."""
        return [event for event, _ in self._pending]

    @property
    def unacknowledged(self) -> int:
        return len(self._pending)

    def _record(self, draft: Draft) -> TraceEvent | None:
        if self._finished:
            raise RuntimeError("the trace is finished")
        if self.redact is not None:
            # Before the size bound: a cut must never leave half a secret unmatched.
            data = redacted(draft.data, self.redact)
            draft = Draft(draft.kind, self.redact(draft.name), data, draft.ts)
        event = event_from(self.next_seq, draft, self.max_event_bytes)
        size = event_bytes(event)
        if self._cut or not self._fits(size):
            # Once cut, always cut: the trace stops at a point, then says how much followed.
            self._cut = True
            self.dropped += 1
            self.dropped_bytes += size
            return None
        self._keep(event, size)
        return event

    def _fits(self, size: int) -> bool:
        # The last place under each bound is the `dropped` event's.
        within_count = self.next_seq < self.max_events - 1
        return within_count and self.recorded_bytes + size <= self.max_bytes - DROPPED_RESERVE_BYTES

    def _keep(self, event: TraceEvent, size: int) -> None:
        self._pending.append((event, size))
        self.next_seq += 1
        self.recorded_bytes += size
