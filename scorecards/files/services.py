"""The fs rendezvous: a member asks for a running case's files, the runner holding its lease
takes the request from its parked `poll_case_fs_requests` and answers it.

A request is bound to the job's lease at the epoch it was asked under: asked only of a job
leased now, handed only to that lease's holder, answered only by it. The page's side waits
for the answer (`EVERDICT_FS_ANSWER_TIMEOUT_S`, 30 s) reading the row, so an answer given to
any replica is seen by the one that waits.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from core.errors import Conflict, Forbidden, Invalid, NoAnswer, NotFound
from core.fields import ascii_int, query_int
from runnercli.protocol import Ack, BlobRef, CasePathError, FsEntry, FsRequest, check_case_path
from runnercli.protocol.world import fs_error_reason
from runners.models import JobStatus, Runner, RunnerJob
from runners.wakeup import answers, notify_fs_answered, notify_fs_runners
from scorecards.blobs.services import blob_held, lease_workspace
from scorecards.files.models import CaseFsRequest, FsOp
from scorecards.links import key_may_exist
from scorecards.selectors.runs import run_get

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from scorecards.blobs.services import Blob
    from scorecards.models import Run

# How often the waiting side reads the row when no wake-up comes (an answer given to a replica
# whose notification does not reach this one): often at first, then less. An answer given
# here, or announced by PostgreSQL, is read at once.
_FIRST_READS_S = (0.005,) * 4 + (0.01,) * 8 + (0.02,) * 10 + (0.05,) * 10
_LATER_READ_S = 0.1
# How often a waiting request checks that its lease still stands (a case that ended, or was
# leased again elsewhere, answers nothing more).
_LEASE_CHECK_S = 1.0


@dataclass(frozen=True)
class FsAnswer:
    """What the runner answered: a listing, a file's blob, or (in `error`) why not."""

    run: Run
    key: str
    op: str
    path: str
    entries: list[dict[str, Any]] | None
    blob: Blob | None
    media_type: str
    error: str


def answer_timeout_s() -> float:
    return max(0.05, float(settings.EVERDICT_FS_ANSWER_TIMEOUT_S))


def fs_path(path: str) -> str:
    """A requested path, normalised; Invalid (400) for NUL, `..`, absolute, a drive letter."""
    try:
        normal = check_case_path(path)
    except CasePathError as exc:
        raise Invalid({"path": [str(exc)]}) from exc
    return normal


def _leased_job(run: Run, key: str, repeat: str | int | None) -> RunnerJob:
    jobs = RunnerJob.objects.filter(run=run, case_key=key, status=JobStatus.LEASED)
    # Without a repeat, the first one running.
    number = query_int("repeat", repeat, highest=run.repeats - 1)
    if number is not None:
        jobs = jobs.filter(repeat=number)
    if not key_may_exist(key):
        raise NotFound(f"Case {key!r} not found in run {run.pk}.")
    job = jobs.select_related("leased_by").order_by("repeat").first()
    if job is None or job.leased_by is None:
        raise Conflict(
            f"Case {key!r} of run {run.pk} is not running: its files are read while it runs "
            "(afterwards, its artifacts)."
        )
    return job


def _running_job(user: User, run_id: int, key: str, repeat: str | int | None) -> RunnerJob | None:
    """The case's running job with its run, in one statement, when the user may see the run;
    None otherwise (or for a key or repeat that cannot be: `_leased_job` says why)."""
    try:
        number = query_int("repeat", repeat)
    except Invalid:
        return None
    if not key_may_exist(key):
        return None
    jobs = RunnerJob.objects.filter(
        run_id=run_id,
        run__workspace__memberships__user=user,
        case_key=key,
        status=JobStatus.LEASED,
        leased_by__isnull=False,
    )
    if number is not None:
        jobs = jobs.filter(repeat=number)
    return jobs.select_related("run", "leased_by").order_by("repeat").first()


def fs_request_ask(
    *, user: User, run_id: int, key: str, op: str, path: str, repeat: str | int | None = None
) -> CaseFsRequest:
    """Queue a member's request (viewers included; NotFound for anyone else) for the runner
    holding the running case's lease, and wake its parked poll wherever it is parked."""
    job = _running_job(user, run_id, key, repeat)
    # Not running, or not visible: the run, then the case, say which.
    run = run_get(user=user, run_id=run_id) if job is None else job.run
    if op not in FsOp.values:
        raise Invalid({"op": [f"Must be one of {', '.join(FsOp.values)}."]})
    normal = fs_path(path)
    if job is None:
        job = _leased_job(run, key, repeat)
    assert job.leased_by is not None
    with transaction.atomic():
        request = CaseFsRequest.objects.create(
            job=job, lease_epoch=job.lease_epoch, op=op, path=normal
        )
        notify_fs_runners([job.leased_by.pk])
    request.job.run = run
    return request


def fs_request_wait(*, request: CaseFsRequest, timeout_s: float | None = None) -> FsAnswer:
    """The runner's answer to `request`; NoAnswer (504) when none came in time."""
    with answers.waiting(request.pk) as answered:
        return _wait(request, answered, answer_timeout_s() if timeout_s is None else timeout_s)


def _wait(request: CaseFsRequest, answered: threading.Event, timeout_s: float) -> FsAnswer:
    deadline = time.monotonic() + timeout_s
    reads = iter(_FIRST_READS_S)
    lease_checked = time.monotonic()
    while True:
        answered.clear()
        row = CaseFsRequest.objects.select_related("blob").filter(pk=request.pk).first()
        if row is not None and row.answered_at is not None:
            # Read once: the row goes, and the content's blob, named by nothing else, is
            # removed by `blobs_gc` a day later (the page has read it by then).
            row.delete()
            return _answer(request, row)
        remaining = deadline - time.monotonic()
        if row is None or remaining <= 0:
            break
        if time.monotonic() - lease_checked >= _LEASE_CHECK_S:
            lease_checked = time.monotonic()
            _still_leased(request)
        answered.wait(min(next(reads, _LATER_READ_S), remaining))
    CaseFsRequest.objects.filter(pk=request.pk, answered_at__isnull=True).delete()
    raise NoAnswer(
        f"The runner did not answer within {answer_timeout_s():g} s: it may be busy, asleep "
        "or offline. Try again."
    )


def _still_leased(request: CaseFsRequest) -> None:
    leased = RunnerJob.objects.filter(
        pk=request.job_id, status=JobStatus.LEASED, lease_epoch=request.lease_epoch
    ).exists()
    if not leased:
        CaseFsRequest.objects.filter(pk=request.pk, answered_at__isnull=True).delete()
        raise Conflict(
            "The case is not running any more: its files were not read (its artifacts are "
            "on the case page)."
        )


def _answer(request: CaseFsRequest, row: CaseFsRequest) -> FsAnswer:
    job = request.job
    return FsAnswer(
        run=job.run,
        key=job.case_key,
        op=row.op,
        path=row.path,
        entries=row.entries,
        blob=row.blob,
        media_type=row.media_type or "application/octet-stream",
        error=row.error,
    )


def _open_for(runner: Runner, fences: Sequence[tuple[int, int]]) -> list[int]:
    """The open requests (at most 100, oldest first) for these jobs while this runner holds
    them at these epochs, in one statement."""
    cutoff = timezone.now() - timedelta(seconds=answer_timeout_s())
    wanted = set(fences)
    rows = (
        CaseFsRequest.objects.filter(
            job_id__in={job_id for job_id, _ in wanted},
            job__status=JobStatus.LEASED,
            job__leased_by=runner,
            job__lease_epoch=F("lease_epoch"),
            answered_at__isnull=True,
            taken_at__isnull=True,
            created_at__gte=cutoff,
        )
        .order_by("pk")
        .values_list("pk", "job_id", "lease_epoch")[:100]
    )
    return [pk for pk, job_id, epoch in rows if (job_id, epoch) in wanted]


def fs_requests_take(*, runner: Runner, fences: Sequence[tuple[int, int]]) -> list[FsRequest]:
    """The open requests for the jobs this runner holds at these epochs, marked as taken."""
    # Read first, outside a transaction: a poll usually finds none (one statement).
    ids = _open_for(runner, fences) if fences else []
    if not ids:
        return []
    stamp = timezone.now()
    with transaction.atomic():
        # Taken once: two polls of one runner (the old one still parked while a fresh one
        # takes over) never both answer a request.
        CaseFsRequest.objects.filter(pk__in=ids, taken_at__isnull=True).update(taken_at=stamp)
        rows = list(CaseFsRequest.objects.filter(pk__in=ids, taken_at=stamp).order_by("pk"))
    return [
        FsRequest(request_id=str(row.pk), job_id=row.job_id, op=row.op, path=row.path)  # type: ignore[arg-type]
        for row in rows
    ]


def fs_requests_give_back(*, requests: Sequence[FsRequest]) -> None:
    """Requests taken by a poll whose caller had gone: open again for its next poll."""
    with transaction.atomic():
        CaseFsRequest.objects.filter(
            pk__in=[ascii_int(r.request_id) for r in requests], answered_at__isnull=True
        ).update(taken_at=None)


def fs_request_answer(
    *,
    runner: Runner,
    job_id: int,
    lease_epoch: int,
    request_id: str,
    entries: Sequence[FsEntry] | None = None,
    blob: BlobRef | None = None,
    error: str | None = None,
) -> Ack:
    """The runner's answer: accepted only from the lease's current holder, for a request of
    that lease still open, naming a blob of the job's workspace within the artifact limit."""
    if sum(x is not None for x in (entries, blob, error)) != 1:
        return Ack(accepted=False, reason="answer with exactly one of entries, blob or error")
    workspace_id, why = lease_workspace(
        runner=runner, job_id=job_id, lease_epoch=lease_epoch, call="answer_case_fs_request"
    )
    if workspace_id is None:
        return Ack(accepted=False, reason=why)
    held = None
    if blob is not None:
        if blob.size > settings.EVERDICT_MAX_ARTIFACT_BYTES:
            return Ack(accepted=False, reason="the file is over max_artifact_bytes")
        held = blob_held(workspace=workspace_id, sha256=blob.sha256, size=blob.size)
        if held is None:
            return Ack(accepted=False, reason=f"blob {blob.sha256} was not uploaded")
    pk = ascii_int(request_id)
    if pk is None:
        return Ack(accepted=False, reason=f"no open request {request_id} for this lease")
    with transaction.atomic():
        updated = CaseFsRequest.objects.filter(
            pk=pk, job_id=job_id, lease_epoch=lease_epoch, answered_at__isnull=True
        ).update(
            answered_at=timezone.now(),
            entries=[e.model_dump() for e in entries] if entries is not None else None,
            blob=held,
            media_type=blob.media_type if blob is not None else "",
            error=(error or "")[:500],
        )
        if updated:
            notify_fs_answered(pk)
    if not updated:
        return Ack(accepted=False, reason=f"no open request {request_id} for this lease")
    return Ack(accepted=True)


def _raise_refusal(answer: FsAnswer) -> None:
    reason, message = fs_error_reason(answer.error), answer.error
    if reason == "not_found":
        raise NotFound(message)
    if reason in ("refused", "kept"):
        raise Forbidden(message)
    raise Invalid({"path": [message]})


def fs_answer_get(
    *, user: User, run_id: int, key: str, op: str, path: str, repeat: str | int | None = None
) -> FsAnswer:
    """Ask the runner for a running case's listing (`list`) or file (`read`) and wait for
    its answer: what the page, `GET /api/runs/<id>/files` and the MCP tools call (a `read`
    of a directory is answered with its listing). A refusal
    of the runner is an error of its kind (404, 403, 400); no answer in time a 504."""
    request = fs_request_ask(user=user, run_id=run_id, key=key, op=op, path=path, repeat=repeat)
    answer = fs_request_wait(request=request)
    if answer.error:
        _raise_refusal(answer)
    return answer
