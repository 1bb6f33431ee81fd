"""The fs rendezvous: a member asks for a running case's files, the runner holding its lease
takes the request from its parked `poll_case_fs_requests` and answers it.

A request is bound to the job's lease at the epoch it was asked under: asked only of a job
leased now, handed only to that lease's holder, answered only by it. The page's side waits
for the answer (`EVERDICT_FS_ANSWER_TIMEOUT_S`, 30 s): an answer given in the process where
it waits is handed to it in memory; one given to another replica wakes it by its
notification and is read from the row, so an answer given to any replica is seen.

Each step on the way is one statement: the ask (an INSERT … SELECT of the running job, with
its `pg_notify`), the take (an UPDATE … RETURNING), the answer (an UPDATE … RETURNING that
checks the lease, with its `pg_notify`) and the read (a DELETE … RETURNING) — or, when the
page waits in the answering process, the answer and the read in one (a DELETE … RETURNING
that checks the lease; the answer handed over). The runner's steps are in `runner`. On PostgreSQL
they commit without waiting for the WAL flush (`synchronous_commit` off for that statement
alone): these rows live for the length of one page request, and a crash that lost the last
of them loses only requests whose page gets its 504 and asks again.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core.errors import Conflict, Forbidden, Invalid, NoAnswer, NotFound
from core.fields import query_int
from runnercli.protocol import (
    CasePathError,
    check_case_path,
)
from runnercli.protocol.world import fs_error_reason
from runners.models import JobStatus, RunnerJob
from runners.wakeup import (
    FS_CHANNEL,
    answers,
    fs_hub,
    notify_fs_runners,
)
from scorecards.files.models import CaseFsRequest, FsOp
from scorecards.links import key_may_exist
from scorecards.models import Membership, Run
from scorecards.selectors.runs import run_get

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from scorecards.blobs.services import Blob

# How often the waiting side reads the row when no wake-up comes (an answer given to a replica
# whose notification does not reach this one, the listener reconnecting). An answer given
# here, or announced by PostgreSQL, wakes it at once.
_FALLBACK_READ_S = 0.25
# How often a waiting request checks that its lease still stands (a case that ended, or was
# leased again elsewhere, answers nothing more).
_LEASE_CHECK_S = 1.0


@dataclass(frozen=True)
class FsContent:
    """What the runner answered: a listing, a file's blob, or (in `error`) why not — as its
    row holds it, or as handed to a request waiting in this process (the row deleted)."""

    op: str
    path: str
    entries: list[dict[str, Any]] | None
    blob: Blob | None
    media_type: str
    error: str


@dataclass(frozen=True)
class FsAnswer(FsContent):
    """The answer to a request for a case of a run."""

    run_id: int
    key: str


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


# The columns' ranges (ids; epochs and repeats): a value outside names no row.
BIGINT, EPOCH = 2**63, 2**31


def _running_job_sql(
    user: User, run_id: int, key: str, repeat: str | int | None
) -> tuple[str, list[Any]] | None:
    """A statement that finds the case's running job (the first repeat running, or the one
    asked for) when the user may see the run: its id, lease epoch and holder. None for a key
    or repeat that cannot be (`_leased_job` says why). Written out: it is built on every
    request, and the ORM's compilation of it cost more than running it."""
    try:
        number = query_int("repeat", repeat)
    except Invalid:
        return None
    if not key_may_exist(key) or not 0 < run_id < BIGINT:
        return None
    if number is not None and not 0 <= number < EPOCH:
        return None
    jobs, runs, members = (m._meta.db_table for m in (RunnerJob, Run, Membership))
    sql = (
        f"SELECT j.id AS pk, j.lease_epoch, j.leased_by_id FROM {jobs} j "
        f"JOIN {runs} r ON r.id = j.run_id "
        f"JOIN {members} m ON m.workspace_id = r.workspace_id AND m.user_id = %s "
        "WHERE j.run_id = %s AND j.case_key = %s AND j.status = %s "
        "AND j.leased_by_id IS NOT NULL"
    )
    params: list[Any] = [user.pk, run_id, key, JobStatus.LEASED]
    if number is not None:
        sql += " AND j.repeat = %s"
        params.append(number)
    return sql + " ORDER BY j.repeat LIMIT 1", params


@dataclass(frozen=True)
class FsAsked:
    """A request queued: its id, the lease it is bound to, and the case it asks of."""

    pk: int
    job_id: int
    lease_epoch: int
    run_id: int
    key: str


def on_postgres() -> bool:
    return connection.vendor == "postgresql"


def async_commit() -> str:
    """A select-list item that lets this statement's transaction commit without waiting for
    the WAL flush (see the module's docstring) — only when it is a transaction of its own."""
    if connection.in_atomic_block:
        return "NULL"
    return "set_config('synchronous_commit', 'off', true)"


def fs_request_ask(
    *, user: User, run_id: int, key: str, op: str, path: str, repeat: str | int | None = None
) -> FsAsked:
    """Queue a member's request (viewers included; NotFound for anyone else) for the runner
    holding the running case's lease, and wake its parked poll wherever it is parked."""
    try:
        if op not in FsOp.values:
            raise Invalid({"op": [f"Must be one of {', '.join(FsOp.values)}."]})
        normal = fs_path(path)
    except Invalid:
        run_get(user=user, run_id=run_id)  # NotFound first for a run the user may not see
        raise
    asked = _insert(_running_job_sql(user, run_id, key, repeat), op, normal)
    if asked is None:
        # Not running, or not visible: the run, then the case, say which.
        run = run_get(user=user, run_id=run_id)
        job = _leased_job(run, key, repeat)
        assert job.leased_by is not None
        with transaction.atomic():
            made = CaseFsRequest.objects.create(
                job=job, lease_epoch=job.lease_epoch, op=op, path=normal
            )
            notify_fs_runners([job.leased_by.pk])
        asked = (made.pk, job.pk, job.lease_epoch)
    pk, job_id, epoch = asked
    return FsAsked(pk=pk, job_id=job_id, lease_epoch=epoch, run_id=run_id, key=key)


def _insert(jobs: tuple[str, list[Any]] | None, op: str, path: str) -> tuple[int, int, int] | None:
    """The request queued for the job `jobs` finds, its runner woken: (id, job id, epoch), or
    None when it finds none. One statement on PostgreSQL (its notification included)."""
    if jobs is None:
        return None
    select, params = jobs
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    if not on_postgres():
        with connection.cursor() as cursor:
            cursor.execute(select, params)
            job = cursor.fetchone()
        if job is None:
            return None
        made = CaseFsRequest.objects.create(job_id=job[0], lease_epoch=job[1], op=op, path=path)
        transaction.on_commit(lambda: fs_hub.wake([job[2]]))
        return made.pk, job[0], job[1]
    sql = (
        f"WITH j AS ({select}), made AS ("
        f"INSERT INTO {CaseFsRequest._meta.db_table} "
        "(job_id, lease_epoch, op, path, created_at, media_type, error) "
        "SELECT j.pk, j.lease_epoch, %s, %s, %s, '', '' FROM j "
        "RETURNING id, job_id, lease_epoch) "
        "SELECT made.id, made.job_id, made.lease_epoch, j.leased_by_id, "
        f"pg_notify(%s, j.leased_by_id::text) IS NULL, {async_commit()} "
        "FROM made JOIN j ON j.pk = made.job_id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, op, path, now, FS_CHANNEL])
        row = cursor.fetchone()
    if row is None:
        return None
    runner_id = row[3]
    transaction.on_commit(lambda: fs_hub.wake([runner_id]))
    return row[0], row[1], row[2]


def fs_request_wait(*, request: FsAsked, timeout_s: float | None = None) -> FsAnswer:
    """The runner's answer to `request`; NoAnswer (504) when none came in time."""
    wait = FsWait.start(request, timeout_s)
    with answers.waiting(request.pk, threading.Event()) as answered:
        while True:
            woken = answered.wait(wait.next_wait())
            answered.clear()
            answer = wait.handed() or wait.look(woken=woken)
            if answer is not None:
                return answer


@dataclass
class FsWait:
    """The page's side of one request: when to look for its answer, and what a look finds.
    Woken by the answer (given here, or announced by PostgreSQL), it looks at once; without
    a wake-up, every `_FALLBACK_READ_S`, for an answer whose notification did not reach
    this process."""

    request: FsAsked
    deadline: float
    lease_checked: float

    @classmethod
    def start(cls, request: FsAsked, timeout_s: float | None = None) -> FsWait:
        now = time.monotonic()
        return cls(request, now + (answer_timeout_s() if timeout_s is None else timeout_s), now)

    def next_wait(self) -> float:
        """How long to wait for a wake-up before the next look."""
        return max(0.0, min(_FALLBACK_READ_S, self.deadline - time.monotonic()))

    def handed(self) -> FsAnswer | None:
        """The answer handed over in this process, if it was (no database read)."""
        handed = answers.handed(self.request.pk)
        return _answer(self.request, handed) if isinstance(handed, FsContent) else None

    def look(self, *, woken: bool) -> FsAnswer | None:
        """The answer, read (and its row deleted) if it came; None to wait again. NoAnswer
        past the deadline or when the request went with its job; Conflict when the lease
        ended meanwhile."""
        pk = self.request.pk
        row = _read_answer(pk)
        handed = self.handed()  # handed over while it read
        if handed is not None:
            return handed
        if row is not None:
            return _answer(self.request, row)
        if time.monotonic() < self.deadline:
            if woken:
                return None
            if CaseFsRequest.objects.filter(pk=pk).exists():  # not gone with its job
                if time.monotonic() - self.lease_checked >= _LEASE_CHECK_S:
                    self.lease_checked = time.monotonic()
                    _still_leased(self.request)
                return None
            if answers.coming(pk):  # gone with its answer, handed over now
                return self.handed()
        CaseFsRequest.objects.filter(pk=pk, answered_at__isnull=True).delete()
        raise NoAnswer(
            f"The runner did not answer within {answer_timeout_s():g} s: it may be busy, "
            "asleep or offline. Try again."
        )


def _read_answer(pk: int) -> CaseFsRequest | None:
    """The request's row if it is answered, deleted as it is read (one statement): read
    once, the content's blob, named by nothing else, is removed by `blobs_gc` a day later
    (the page has read it by then)."""
    table = CaseFsRequest._meta.db_table
    rows = CaseFsRequest.objects.raw(
        f"DELETE FROM {table} WHERE id = %s AND answered_at IS NOT NULL "
        "RETURNING id, job_id, lease_epoch, op, path, entries, blob_id, media_type, error"
        f"{', ' + async_commit() if on_postgres() else ''}",
        [pk],
    )
    found = list(rows)
    return found[0] if found else None


def _still_leased(request: FsAsked) -> None:
    leased = RunnerJob.objects.filter(
        pk=request.job_id, status=JobStatus.LEASED, lease_epoch=request.lease_epoch
    ).exists()
    if not leased:
        CaseFsRequest.objects.filter(pk=request.pk, answered_at__isnull=True).delete()
        raise Conflict(
            "The case is not running any more: its files were not read (its artifacts are "
            "on the case page)."
        )


def _answer(request: FsAsked, content: CaseFsRequest | FsContent) -> FsAnswer:
    """The answer in its row (read) or handed over: a row without a blob has None there."""
    return FsAnswer(
        run_id=request.run_id,
        key=request.key,
        op=content.op,
        path=content.path,
        entries=content.entries,
        blob=content.blob,
        media_type=content.media_type or "application/octet-stream",
        error=content.error,
    )


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
    return fs_answer_accepted(fs_request_wait(request=request))


def fs_answer_accepted(answer: FsAnswer) -> FsAnswer:
    """The answer if the runner gave one; its refusal as an error of its kind otherwise."""
    if answer.error:
        _raise_refusal(answer)
    return answer
