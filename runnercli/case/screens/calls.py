"""The runner's call of the case's screen tool (protocol 3), through the client's public
`call`: `report_case_screen`, fenced by the case's lease."""

from __future__ import annotations

import base64

from runnercli.client.calls import RunnerClient
from runnercli.protocol import BlobRef, ScreenAck


async def report_case_screen(
    client: RunnerClient,
    *,
    job_id: int,
    lease_epoch: int,
    media_type: str,
    data: bytes,
    taken_at: int,
    blob: BlobRef | None = None,
) -> ScreenAck:
    """Send the case's newest frame (PNG or JPEG, at most `limits.max_screen_bytes`): its
    bytes, or the blob they were uploaded as (feature `raw_upload`)."""
    args: dict[str, object] = {
        "job_id": job_id,
        "lease_epoch": lease_epoch,
        "media_type": media_type,
        "taken_at": taken_at,
    }
    if blob is None:
        args["data"] = base64.b64encode(data).decode("ascii")
    else:
        args["blob"] = blob.model_dump()
    return await client.call("report_case_screen", args, ScreenAck)
