"""The fs rendezvous over MCP (protocol 3): the runner's parked `poll_case_fs_requests` and
its `answer_case_fs_request`, and the personal tools `list_case_files` / `read_case_file`
that ask for a running case's files with the authorization of `get_case`.

The poll parks on a hub of its own, keyed by the runner (`wakeup.fs_hub`), so the request of
a page wakes it in this process or, through PostgreSQL's notifications, on any replica, and a
job's dispatch does not. A runner's newer poll ends its older one parked in the same process.

Server feature `fs_answers`: a poll may carry the runner's answers to the requests its last
poll took (`answers`), each written as `answer_case_fs_request` writes it (fenced alike), in
the thread hop of the poll's first look, before it parks: the runner's answer and its next
poll in one call.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from channels.db import database_sync_to_async
from django.conf import settings
from pydantic import Field

from core.errors import Invalid, ServiceError
from mcpgateway.artifact_tools import MAX_ARTIFACT_CONTENT_BYTES, RunId
from mcpgateway.auth import current_principal
from mcpgateway.calls import in_thread, tool_error
from runnercli.protocol import (
    MAX_JOBS_PER_LEASE,
    MAX_WAIT_MS,
    Ack,
    BlobRef,
    FsEntries,
    FsPosted,
    FsRequest,
    FsRequests,
    JobFence,
)
from runnercli.protocol.world import MAX_FS_POSTED
from runners import metrics, wakeup
from runners.queue.longpoll import cancel_once
from scorecards.blobs.services import blob_open
from scorecards.files.awaiting import fs_answer_aget
from scorecards.files.replies import CaseFileContent, CaseFiles
from scorecards.files.runner import (
    fs_request_answer,
    fs_requests_give_back,
    fs_requests_post,
)
from scorecards.files.runner import fs_requests_take as take
from scorecards.files.services import FsAnswer

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from runners.models import Runner

Fences = Annotated[list[JobFence], Field(max_length=4 * MAX_JOBS_PER_LEASE)]
Posted = Annotated[
    list[FsPosted] | None,
    Field(
        max_length=MAX_FS_POSTED,
        description="Feature `fs_answers`: answers (a listing or an error) to requests an "
        "earlier poll took, written before this poll looks and parks.",
    ),
]


class _Newest:
    """The newest `poll_case_fs_requests` of each runner in this process: a poll that is no
    longer its runner's newest ends at once with what it took, so a runner whose cases come
    and go keeps one poll parked here, not one per change of its set of cases."""

    def __init__(self) -> None:
        self._serial = itertools.count(1)
        # runner id -> (the newest poll's serial, the waiter it is parked on, if any)
        self._polls: dict[int, tuple[int, Any]] = {}

    def begin(self, runner_id: int) -> int:
        serial = next(self._serial)
        previous = self._polls.get(runner_id)
        self._polls[runner_id] = (serial, None)
        if previous is not None and previous[1] is not None:
            previous[1].wake()
        return serial

    def park(self, runner_id: int, serial: int, waiter: Any) -> bool:
        """Record where the newest poll waits; False when `serial` is no longer the newest."""
        if not self.is_newest(runner_id, serial):
            return False
        self._polls[runner_id] = (serial, waiter)
        return True

    def is_newest(self, runner_id: int, serial: int) -> bool:
        return self._polls.get(runner_id, (0, None))[0] == serial

    def end(self, runner_id: int, serial: int) -> None:
        if self.is_newest(runner_id, serial):
            del self._polls[runner_id]


newest = _Newest()


def _post_and_take(
    runner: Runner, fences: list[tuple[int, int]], posted: list[FsPosted]
) -> list[FsRequest]:
    fs_requests_post(runner=runner, answers=posted)
    return take(runner=runner, fences=fences)


async def _wait_for_requests(
    runner: Runner, fences: list[tuple[int, int]], wait_ms: int, posted: list[FsPosted]
) -> Any:
    wait_ms = min(wait_ms, MAX_WAIT_MS, settings.EVERDICT_MAX_WAIT_MS)
    deadline = time.monotonic() + max(0, wait_ms) / 1000
    wakeup.ensure_started()
    taking = database_sync_to_async(take, thread_sensitive=False)
    serial = newest.begin(runner.pk)
    try:
        while True:
            # Registered before the read: a request committed while it runs still wakes it.
            # Keyed by the runner (a dispatch to its owner does not wake it).
            with wakeup.fs_hub.waiting(runner.pk) as waiter:
                if posted:
                    # The answers carried, written in the first look's thread hop.
                    found = await database_sync_to_async(_post_and_take, thread_sensitive=False)(
                        runner, fences, posted
                    )
                    posted = []
                else:
                    found = await taking(runner=runner, fences=fences)
                remaining = deadline - time.monotonic()
                if found or remaining <= 0 or not newest.park(runner.pk, serial, waiter):
                    return found
                woken = await waiter.wait(remaining)
            if not woken or not newest.is_newest(runner.pk, serial):
                return []
    finally:
        newest.end(runner.pk, serial)


async def _give_back(requests: list[FsRequest]) -> None:
    await database_sync_to_async(fs_requests_give_back, thread_sensitive=False)(requests=requests)


async def poll_case_fs_requests(
    job_ids: Fences, wait_ms: int = 0, answers: Posted = None
) -> FsRequests:
    """Members' requests for the files of the running cases named (`{job_id, lease_epoch}`
    each), waiting up to `wait_ms` for one; keep one such poll parked while any case runs."""
    runner = current_principal().require_runner("poll_case_fs_requests")
    metrics.FS_POLLS.inc()
    fences = [(fence.job_id, fence.lease_epoch) for fence in job_ids]
    found = await cancel_once(
        _wait_for_requests(runner, fences, wait_ms, answers or []), undelivered=_give_back
    )
    return FsRequests(requests=found)


async def answer_case_fs_request(
    job_id: int,
    lease_epoch: int,
    request_id: Annotated[str, Field(max_length=40)],
    entries: FsEntries | None = None,
    blob: BlobRef | None = None,
    error: Annotated[str | None, Field(max_length=500)] = None,
) -> Ack:
    """Answer a request with a listing (`entries`), a file uploaded as a blob first
    (`have_blobs`/`put_blob`, ≤ `max_artifact_bytes`), or why not (`error`)."""
    runner = current_principal().require_runner("answer_case_fs_request")
    return await in_thread(
        fs_request_answer,
        runner=runner,
        job_id=job_id,
        lease_epoch=lease_epoch,
        request_id=request_id,
        entries=entries,
        blob=blob,
        error=error,
    )


async def _answer(user: User, run_id: int, key: str, op: str, path: str) -> FsAnswer:
    # Awaited on the loop: a tool waiting for a runner blocks no thread of the pool.
    try:
        return await fs_answer_aget(user=user, run_id=run_id, key=key, op=op, path=path)
    except ServiceError as exc:
        raise tool_error(exc) from exc


def _content(answer: FsAnswer) -> CaseFileContent:
    if answer.blob is None:
        raise Invalid({"path": [f"{answer.path!r} is a directory: list it with list_case_files."]})
    with blob_open(answer.blob) as handle:
        head = bytes(handle.read(MAX_ARTIFACT_CONTENT_BYTES + 1))
    truncated = len(head) > MAX_ARTIFACT_CONTENT_BYTES
    return CaseFileContent.read(answer, head[:MAX_ARTIFACT_CONTENT_BYTES], truncated)


async def list_case_files(run_id: RunId, key: str, path: str = "") -> CaseFiles:
    """A directory of a running case's working directory (its top by default), as its runner
    sees it now: each entry's path, size, kind and mtime."""
    user = current_principal().require_user("list_case_files")
    return CaseFiles.of(await _answer(user, run_id, key, "list", path))


async def read_case_file(run_id: RunId, key: str, path: str) -> CaseFileContent:
    """A file of a running case, read by its runner now: text as text, anything else as
    base64 — the first MiB of it (`truncated` says there is more, at `url`)."""
    user = current_principal().require_user("read_case_file")
    answer = await _answer(user, run_id, key, "read", path)
    return await in_thread(_content, answer=answer)


FS_RUNNER_TOOLS: list[Callable[..., Any]] = [poll_case_fs_requests, answer_case_fs_request]
FS_PERSONAL_TOOLS: list[Callable[..., Any]] = [list_case_files, read_case_file]
