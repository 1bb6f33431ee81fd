"""Runner tools of a running case's trace and screen (protocol 3), fenced like its log.

`report_case_trace` stores the events of the lease's attempt it does not hold yet and answers
the highest seq it holds (`TraceAck.last_seq`), from which the runner sends on: a batch sent
twice stores nothing twice. `report_case_screen` takes the case's newest frame.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from mcpgateway.auth import current_principal
from mcpgateway.calls import in_thread
from runnercli.protocol import MAX_TRACE_EVENTS_PER_CALL, TraceAck, TraceEvent
from scorecards.traces.services import trace_report

TraceEvents = Annotated[
    list[TraceEvent],
    Field(
        max_length=MAX_TRACE_EVENTS_PER_CALL,
        description="`{seq, ts, kind, name, data}`, seq counting from 0 per attempt.",
    ),
]


async def report_case_trace(job_id: int, lease_epoch: int, events: TraceEvents) -> TraceAck:
    """Append trace events to the case's attempt; idempotent by seq (`last_seq`: the highest
    stored with every one before it — send on from there)."""
    runner = current_principal().require_runner("report_case_trace")
    return await in_thread(
        trace_report, runner=runner, job_id=job_id, lease_epoch=lease_epoch, events=events
    )


TRACE_TOOLS: list[Callable[..., Any]] = [report_case_trace]
