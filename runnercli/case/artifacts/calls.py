"""The blob tools (protocol 3): what the job's workspace holds, and uploads in chunks."""

from __future__ import annotations

import base64
from collections.abc import Sequence

from runnercli.client.calls import RunnerClient
from runnercli.client.errors import ToolCallError
from runnercli.protocol import BlobAck, BlobHoldings, JobFence, UploadGrant, UploadGrants


async def have_blobs(client: RunnerClient, fence: JobFence, sha256s: Sequence[str]) -> BlobHoldings:
    """Which of these blobs the job's workspace lacks, and where partial uploads resume."""
    args = {"job_id": fence.job_id, "lease_epoch": fence.lease_epoch, "sha256": list(sha256s)}
    return await client.call("have_blobs", args, BlobHoldings)


async def put_blob(
    client: RunnerClient, fence: JobFence, sha256: str, offset: int, data: bytes, final: bool
) -> BlobAck:
    """Send one chunk of a blob at `offset` (base64 on the wire); `final` commits it."""
    args = {
        "job_id": fence.job_id,
        "lease_epoch": fence.lease_epoch,
        "sha256": sha256,
        "offset": offset,
        "data": base64.b64encode(data).decode("ascii"),
        "final": final,
    }
    return await client.call("put_blob", args, BlobAck)


async def begin_upload(
    client: RunnerClient, fence: JobFence, sha256: str, size: int
) -> UploadGrant:
    """Feature `raw_upload`: a URL to `PUT` the blob's bytes to, and the offset held."""
    args = {"job_id": fence.job_id, "lease_epoch": fence.lease_epoch, "sha256": sha256}
    return await client.call("begin_upload", {**args, "size": size}, UploadGrant)


async def begin_uploads(
    client: RunnerClient, fence: JobFence, blobs: Sequence[tuple[str, int]]
) -> list[UploadGrant]:
    """Server feature `upload_batch`: `begin_upload` for several blobs `(sha256, size)` in
    one call, a grant per blob in order."""
    args = {
        "job_id": fence.job_id,
        "lease_epoch": fence.lease_epoch,
        "blobs": [{"sha256": sha256, "size": size} for sha256, size in blobs],
    }
    reply = await client.call("begin_uploads", args, UploadGrants)
    if len(reply.grants) != len(blobs):
        raise ToolCallError(f"begin_uploads: {len(reply.grants)} grants for {len(blobs)} blobs")
    return reply.grants
