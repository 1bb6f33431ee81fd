"""The fs rendezvous tools (protocol 3): the parked poll for members' requests for a running
case's files, and the answer to one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runnercli.client.calls import RunnerClient
from runnercli.protocol import Ack, BlobRef, FsEntry, FsPosted, FsRequests, JobFence

# The server's feature: a poll may carry the answers to what the last one took.
FS_ANSWERS = "fs_answers"


async def poll_case_fs_requests(
    client: RunnerClient,
    fences: Sequence[JobFence],
    wait_ms: int,
    answers: Sequence[FsPosted] = (),
) -> FsRequests:
    """The requests for these jobs' files, waiting up to `wait_ms` for one; `answers` (a
    server with `fs_answers` only) written first."""
    wait_ms = max(0, min(wait_ms, client.limits.max_wait_ms))
    args: dict[str, Any] = {"job_ids": [fence.model_dump() for fence in fences], "wait_ms": wait_ms}
    if answers:
        args["answers"] = [answer.model_dump(exclude_none=True) for answer in answers]
    return await client.call("poll_case_fs_requests", args, FsRequests, wait_s=wait_ms / 1000)


async def answer_case_fs_request(
    client: RunnerClient,
    fence: JobFence,
    request_id: str,
    *,
    entries: Sequence[FsEntry] | None = None,
    blob: BlobRef | None = None,
    error: str | None = None,
) -> Ack:
    """Answer one request: a listing, a file already uploaded as a blob, or why not."""
    args: dict[str, Any] = {
        "job_id": fence.job_id,
        "lease_epoch": fence.lease_epoch,
        "request_id": request_id,
    }
    if entries is not None:
        args["entries"] = [entry.model_dump() for entry in entries]
    if blob is not None:
        args["blob"] = blob.model_dump()
    if error is not None:
        args["error"] = error[:500]
    return await client.call("answer_case_fs_request", args, Ack)
