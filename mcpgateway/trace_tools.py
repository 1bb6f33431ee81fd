"""Runner tools of a running case's trace and screen (protocol 3), fenced like its log.

`report_case_trace` stores the events of the lease's attempt it does not hold yet and answers
the highest seq it holds (`TraceAck.last_seq`), from which the runner sends on: a batch sent
twice stores nothing twice. `report_case_screen` takes the case's newest frame.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mcpgateway.auth import current_principal
from mcpgateway.blob_tools import decoded_chunk
from mcpgateway.calls import in_thread
from runnercli.protocol import (
    MAX_SCREEN_BYTES,
    MAX_TRACE_EVENTS_PER_CALL,
    BlobRef,
    ScreenAck,
    TraceAck,
    TraceEvent,
)
from scorecards.traces.screens import screen_report
from scorecards.traces.services import trace_report

# The base64 of the largest frame, padding included: checked before anything is decoded.
MAX_SCREEN_BASE64_CHARS = 4 * -(-MAX_SCREEN_BYTES // 3)

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


async def report_case_screen(
    job_id: int,
    lease_epoch: int,
    media_type: Literal["image/png", "image/jpeg"],
    taken_at: Annotated[int, Field(ge=0, description="When it was taken, epoch ms.")],
    data: Annotated[
        str,
        Field(
            max_length=MAX_SCREEN_BASE64_CHARS,
            description=f"Base64 of a PNG or JPEG of at most {MAX_SCREEN_BYTES} bytes.",
        ),
    ] = "",
    blob: Annotated[
        BlobRef | None,
        Field(description="Feature `raw_upload`: the frame uploaded as a blob, instead of data."),
    ] = None,
) -> ScreenAck:
    """The case's newest frame: shown live on the run page, and kept in its filmstrip (at
    most 60 frames, spread over the case). Refused unless it is a whole PNG or JPEG.
    `keeps_next`: whether the strip will keep the next frame (a large one may go by `PUT`)."""
    runner = current_principal().require_runner("report_case_screen")
    frame = decoded_chunk(data) if blob is None else None
    if frame is not None and len(frame) > MAX_SCREEN_BYTES:
        raise ToolError(f"a frame is at most {MAX_SCREEN_BYTES} bytes")
    return await in_thread(
        screen_report,
        runner=runner,
        job_id=job_id,
        lease_epoch=lease_epoch,
        media_type=media_type,
        data=frame,
        blob=blob,
        taken_at=taken_at,
    )


TRACE_TOOLS: list[Callable[..., Any]] = [report_case_trace, report_case_screen]
