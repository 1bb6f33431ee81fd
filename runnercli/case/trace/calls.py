"""The runner's call of the case's trace tool (protocol 3), through the client's public
`call`: `report_case_trace`, fenced by the case's lease."""

from __future__ import annotations

from collections.abc import Sequence

from runnercli.client.calls import RunnerClient
from runnercli.protocol import TraceAck, TraceEvent


async def report_case_trace(
    client: RunnerClient, *, job_id: int, lease_epoch: int, events: Sequence[TraceEvent]
) -> TraceAck:
    """Send trace events; the ack's `last_seq` is the highest the server holds with every
    one before it (send on from there)."""
    args = {
        "job_id": job_id,
        "lease_epoch": lease_epoch,
        "events": [event.model_dump(mode="json") for event in events],
    }
    return await client.call("report_case_trace", args, TraceAck)
