"""The lease queue: jobs keyed by (owner, runner | any), leases fenced by (job, epoch).

These primitives change queue state and return what they changed; they never write
results or run state. Callers that settle a job (scorecards) wrap them in their own
transaction together with what they record.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Coroutine, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import anyio
from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from runnercli.protocol import (
    MAX_JOBS_PER_LEASE,
    MAX_WAIT_MS,
    Ack,
    CaseJob,
    HeartbeatAck,
    Lease,
)
from runners import metrics, wakeup
from runners.models import (
    ACTIVE_JOB_STATUSES,
    AttemptStatus,
    JobAttempt,
    JobBatch,
    JobLogLine,
    JobStatus,
    Runner,
    RunnerJob,
)
from runners.presence import runner_touch

# SQLite has no JSON containment: claims filter a batch of candidates in Python.
_SQLITE_CANDIDATE_BATCH = 200


def lease_ttl() -> timedelta:
    return timedelta(seconds=settings.EVERDICT_LEASE_TTL_S)


@dataclass(frozen=True)
class LeasedJob:
    job: RunnerJob
    attempt: JobAttempt

    @property
    def case_job(self) -> CaseJob:
        return CaseJob(
            job_id=self.job.pk,
            attempt_id=self.attempt.pk,
            lease_epoch=self.job.lease_epoch,
            **self.job.batch.payload,
            **self.job.payload,
        )

    @property
    def lease(self) -> Lease:
        ttl_ms = settings.EVERDICT_LEASE_TTL_S * 1000
        return Lease(
            job_id=self.job.pk,
            lease_epoch=self.job.lease_epoch,
            lease_ttl_ms=ttl_ms,
            heartbeat_ms=max(ttl_ms // 3, 100),
        )


@dataclass
class Settlement:
    """What a fenced settling call did. `job` is set whenever the job exists for the caller."""

    accepted: bool
    reason: str = ""
    job: RunnerJob | None = None
    duplicate: bool = False
    requeued: bool = False
    ended: bool = False

    def ack(self) -> Ack:
        return Ack(accepted=self.accepted, reason=self.reason)


@dataclass
class Ended:
    """Jobs a queue primitive ended, for the caller to record results for."""

    jobs: list[RunnerJob] = field(default_factory=list)
    requeued: list[RunnerJob] = field(default_factory=list)


# ---------------------------------------------------------------------------- claims


def runner_capabilities_update(*, runner: Runner, capabilities: Sequence[str]) -> None:
    """Store the capabilities the runner reports now, when they changed."""
    wanted = sorted(set(capabilities))
    if wanted != list(runner.capabilities or []):
        Runner.objects.filter(pk=runner.pk).update(capabilities=wanted)
        runner.capabilities = wanted


def job_lease(
    *,
    runner: Runner,
    capabilities: Sequence[str] | None = None,
    status: str = "",
    max_jobs: int = 1,
) -> list[LeasedJob]:
    """Claim up to `max_jobs` of the oldest claimable jobs for this runner, in one transaction.

    Each claim bumps the job's epoch, supersedes the attempt the job names if it is still
    executing, inserts the new executing attempt and points the job at it. All or nothing:
    a claim whose ledger write fails rolls back and leaves the job claimable.
    """
    if capabilities is not None:
        runner_capabilities_update(runner=runner, capabilities=capabilities)
    runner_touch(runner=runner, status=status)
    limit = max(1, min(max_jobs, MAX_JOBS_PER_LEASE))
    with transaction.atomic():
        if connection.vendor == "postgresql":
            granted = _claim_postgres(runner, limit)
        else:
            jobs = _claimable(runner, limit)
            granted = _grant(runner, jobs) if jobs else []
        metrics.CLAIMS.labels(found="yes" if granted else "no").inc()
        return granted


def _claimable_filter(runner: Runner) -> Q:
    # A runner revoked while its long-poll was parked holds a stale row: the claim checks
    # in the same statement (evaluated once, as an init plan) that it is still active.
    still_active = Exists(Runner.objects.filter(pk=runner.pk, revoked_at__isnull=True))
    return (
        Q(status=JobStatus.QUEUED, owner_id=runner.owner_id)
        & (Q(runner_id=runner.pk) | Q(runner__isnull=True))
        & Q(still_active)
    )


def _claimable(runner: Runner, limit: int) -> list[RunnerJob]:
    """The claim's candidates on SQLite, whose IMMEDIATE transaction already holds the single
    write lock; it has no JSON containment, so capabilities are filtered here in batches."""
    base = (
        RunnerJob.objects.filter(_claimable_filter(runner))
        .select_related("batch")
        .order_by("created_at", "id")
    )
    have = set(runner.capabilities or [])
    found: list[RunnerJob] = []
    offset = 0
    while len(found) < limit:
        batch = list(base[offset : offset + _SQLITE_CANDIDATE_BATCH])
        found.extend(j for j in batch if set(j.required_capabilities or []) <= have)
        if len(batch) < _SQLITE_CANDIDATE_BATCH:
            break
        offset += _SQLITE_CANDIDATE_BATCH
    return found[:limit]


def _claim_select(runner: Runner, limit: int) -> tuple[str, list[Any]]:
    """The claim's SELECT on PostgreSQL: the partial index on (owner, created_at, id) WHERE
    status='queued' serves it; SKIP LOCKED lets concurrent claimers pass each other; a
    runner revoked while its poll was parked holds a stale row, so the runner's being
    active is checked in the same statement."""
    columns = ", ".join(f"j.{column}" for column in _JOB_COLUMNS)
    sql = (
        f"SELECT {columns}, b.payload FROM {RunnerJob._meta.db_table} j"
        f" JOIN {JobBatch._meta.db_table} b ON b.id = j.batch_id"
        " WHERE j.owner_id = %s AND j.status = %s"
        " AND (j.runner_id = %s OR j.runner_id IS NULL)"
        " AND j.required_capabilities <@ %s::jsonb"
        f" AND EXISTS (SELECT 1 FROM {Runner._meta.db_table} r"
        " WHERE r.id = %s AND r.revoked_at IS NULL)"
        " ORDER BY j.created_at, j.id LIMIT %s"
        " FOR UPDATE OF j SKIP LOCKED"
    )
    params = [
        runner.owner_id,
        JobStatus.QUEUED,
        runner.pk,
        json.dumps(sorted(runner.capabilities or [])),
        runner.pk,
        limit,
    ]
    return sql, params


def _claim_postgres(runner: Runner, limit: int) -> list[LeasedJob]:
    """The claim on PostgreSQL in two statements of plain SQL (three when a predecessor
    attempt is still executing): it is every lease's path, and the ORM's compilation and
    row building cost more than the database's work.

    The same claim as `_claimable` + `_grant`: the oldest claimable jobs, skipping locked
    ones, over the partial claim index; the runner still active; each job's epoch bumped
    and pointed at a new executing attempt.
    """
    job_table = RunnerJob._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(*_claim_select(runner, limit))
        jobs = [_job_from_row(row) for row in cursor.fetchall()]
        if not jobs:
            return []
        now = timezone.now()
        until = now + lease_ttl()
        _supersede_predecessors(jobs, now)
        cursor.execute(
            f"WITH opened AS ("
            f"  INSERT INTO {JobAttempt._meta.db_table}"
            "   (job_id, epoch, runner_id, status, started_at, ended_at, reason, result_digest)"
            f"  SELECT id, lease_epoch + 1, %s, %s, %s, NULL, '', '' FROM {job_table}"
            "   WHERE id = ANY(%s) RETURNING id, job_id)"
            f" UPDATE {job_table} j SET status = %s, leased_by_id = %s, leased_until = %s,"
            " lease_epoch = j.lease_epoch + 1, attempts = j.attempts + 1,"
            " current_attempt_id = opened.id"
            " FROM opened WHERE j.id = opened.job_id AND j.status = %s"
            " RETURNING j.id, opened.id",
            [
                runner.pk,
                AttemptStatus.EXECUTING,
                now,
                [job.pk for job in jobs],
                JobStatus.LEASED,
                runner.pk,
                until,
                JobStatus.QUEUED,
            ],
        )
        opened = dict(cursor.fetchall())
    if len(opened) != len(jobs):
        raise RuntimeError("claimed jobs changed under their lock")
    granted = []
    for job in jobs:
        _count_lease(job, now)
        job.lease_epoch += 1
        job.attempts += 1
        job.status = JobStatus.LEASED
        job.leased_by = runner
        job.leased_until = until
        attempt = JobAttempt(
            pk=opened[job.pk],
            job=job,
            epoch=job.lease_epoch,
            runner=runner,
            status=AttemptStatus.EXECUTING,
            started_at=now,
        )
        attempt._state.adding = False
        job.current_attempt = attempt
        granted.append(LeasedJob(job=job, attempt=attempt))
    metrics.LEASES.inc(len(granted))
    return granted


_JOB_COLUMNS = [field.column for field in RunnerJob._meta.concrete_fields]
_JOB_FIELDS = [field.attname for field in RunnerJob._meta.concrete_fields]
_JSON_FIELDS = {
    field.attname
    for field in RunnerJob._meta.concrete_fields
    if field.get_internal_type() == "JSONField"
}


def _job_from_row(row: Sequence[Any]) -> RunnerJob:
    """A job (with its batch) from a claim row: the job's columns, then the batch payload."""
    values = dict(zip(_JOB_FIELDS, row[:-1], strict=True))
    for name in _JSON_FIELDS:
        if isinstance(values[name], str):
            values[name] = json.loads(values[name])
    job = RunnerJob.from_db(connection.alias, _JOB_FIELDS, [values[f] for f in _JOB_FIELDS])
    payload = row[-1]
    batch = JobBatch(
        pk=job.batch_id, payload=json.loads(payload) if isinstance(payload, str) else payload
    )
    batch._state.adding = False
    job.batch = batch
    return job


def _supersede_predecessors(jobs: list[RunnerJob], now: datetime) -> None:
    """End the attempts the claimed jobs still name as executing (their holder was revoked)."""
    predecessors = [j.current_attempt_id for j in jobs if j.current_attempt_id]
    if predecessors:
        JobAttempt.objects.filter(pk__in=predecessors, status=AttemptStatus.EXECUTING).update(
            status=AttemptStatus.SUPERSEDED, ended_at=now, reason="superseded by a new lease"
        )


def _count_lease(job: RunnerJob, now: datetime) -> None:
    if job.queued_at is not None:
        metrics.QUEUE_WAIT.observe(max(0.0, (now - job.queued_at).total_seconds()))


def _grant(runner: Runner, jobs: list[RunnerJob]) -> list[LeasedJob]:
    now = timezone.now()
    _supersede_predecessors(jobs, now)
    for job in jobs:
        job.lease_epoch += 1
        job.attempts += 1
        _count_lease(job, now)
    metrics.LEASES.inc(len(jobs))
    attempts = JobAttempt.objects.bulk_create(
        [JobAttempt(job=j, epoch=j.lease_epoch, runner=runner, started_at=now) for j in jobs]
    )
    until = now + lease_ttl()
    # One statement for every claimed job, each pointed at the attempt just opened for its
    # next epoch; conditional on the state we read: under SQLite's single writer, the claim.
    opened = JobAttempt.objects.filter(job_id=OuterRef("pk"), epoch=OuterRef("lease_epoch") + 1)
    claimed = RunnerJob.objects.filter(pk__in=[j.pk for j in jobs], status=JobStatus.QUEUED).update(
        status=JobStatus.LEASED,
        leased_by=runner,
        leased_until=until,
        lease_epoch=F("lease_epoch") + 1,
        attempts=F("attempts") + 1,
        current_attempt=Subquery(opened.values("pk")[:1]),
    )
    if claimed != len(jobs):
        raise RuntimeError("claimed jobs changed under their lock")
    for job, attempt in zip(jobs, attempts, strict=True):
        job.status = JobStatus.LEASED
        job.leased_by = runner
        job.leased_until = until
        job.current_attempt = attempt
    return [LeasedJob(job=j, attempt=a) for j, a in zip(jobs, attempts, strict=True)]


def _nothing_to_claim(runner: Runner, capabilities: Sequence[str] | None) -> bool:
    unchanged = capabilities is None or sorted(set(capabilities)) == list(runner.capabilities or [])
    return unchanged and wakeup.hub.known_empty(runner.owner_id)


async def _claim_or_give_back(
    claiming: Coroutine[Any, Any, list[LeasedJob]], runner: Runner
) -> list[LeasedJob]:
    """Await a claim; if the caller is cancelled meanwhile, give back what it claimed."""
    task = asyncio.ensure_future(claiming)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        # anyio cancel scopes re-cancel every await until they exit: shield the give-back,
        # or a job claimed at the moment the caller left stays leased.
        with anyio.CancelScope(shield=True):
            await asyncio.wait([task])
            if not task.cancelled() and task.exception() is None:
                for grant in task.result():
                    await database_sync_to_async(job_release)(
                        runner=runner, job_id=grant.job.pk, lease_epoch=grant.job.lease_epoch
                    )
        raise


async def job_lease_wait(
    *,
    runner: Runner,
    capabilities: Sequence[str] | None = None,
    status: str = "",
    wait_ms: int = 0,
    max_jobs: int = 1,
) -> list[LeasedJob]:
    """Long-poll: claim at once if a job is claimable, else park until woken or `wait_ms`.

    The claim happens only when about to answer; if the caller is cancelled while a claim
    is completing, the claimed jobs go back to the queue instead of leaking a lease.
    """
    deadline = time.monotonic() + max(0, min(wait_ms, MAX_WAIT_MS)) / 1000
    wakeup.ensure_started()
    # Off the process's single "thread-sensitive" thread: a claim answering a parked runner
    # must not queue behind unrelated synchronous work (such as the dispatch that woke it).
    claim = database_sync_to_async(job_lease, thread_sensitive=False)
    first = True
    while True:
        # A fresh waiter each round, registered before the claim: a dispatch committing
        # while the claim runs sets this round's event and is never lost.
        with wakeup.hub.waiting(runner.owner_id) as event:
            if first and _nothing_to_claim(runner, capabilities):
                # The process's last re-check found none of the owner's jobs queued and no
                # wake-up came since: park at once (presence still counts).
                metrics.CLAIMS.labels(found="skipped").inc()
                await database_sync_to_async(runner_touch, thread_sensitive=False)(
                    runner=runner, status=status
                )
                leased = []
            else:
                leased = await _claim_or_give_back(
                    claim(
                        runner=runner, capabilities=capabilities, status=status, max_jobs=max_jobs
                    ),
                    runner,
                )
            first = False
            remaining = deadline - time.monotonic()
            if leased or remaining <= 0:
                return leased
            # Later rounds only re-check; the capabilities were stored by the first.
            capabilities = None
            # Parked: woken by a dispatch, a notification or the process's re-check task.
            # Nothing woke it by the deadline: answer empty; the runner's next poll claims.
            try:
                await asyncio.wait_for(event.wait(), remaining)
            except TimeoutError:
                return []


def job_release(*, runner: Runner, job_id: int, lease_epoch: int) -> bool:
    """Give back a lease that never reached its caller: the job is claimable again at once."""
    now = timezone.now()
    with transaction.atomic():
        job = _locked_job(job_id)
        if job is None or not _holds(job, runner, lease_epoch):
            return False
        _current_attempt(job).update(
            status=AttemptStatus.SUPERSEDED, ended_at=now, reason="lease not delivered"
        )
        RunnerJob.objects.filter(pk=job.pk).update(
            status=JobStatus.QUEUED,
            leased_by=None,
            leased_until=None,
            attempts=F("attempts") - 1,
        )
        wakeup.notify_owners([job.owner_id])
    return True


# ------------------------------------------------------------------------ fencing


def _locked_job(job_id: int) -> RunnerJob | None:
    return RunnerJob.objects.select_for_update(of=("self",)).filter(pk=job_id).first()


def _current_attempt(job: RunnerJob) -> QuerySet[JobAttempt]:
    """The attempt the job names (none if it never had one)."""
    return JobAttempt.objects.filter(pk=job.current_attempt_id or 0)


def _holds(job: RunnerJob, runner: Runner, lease_epoch: int) -> bool:
    return (
        job.status == JobStatus.LEASED
        and job.leased_by_id == runner.pk
        and job.lease_epoch == lease_epoch
    )


def _refusal(job: RunnerJob | None, runner: Runner, lease_epoch: int) -> str:
    """Say why a fenced call is refused, without revealing anyone else's jobs."""
    if job is None or job.owner_id != runner.owner_id:
        return "unknown job"
    if job.leased_by_id != runner.pk or job.lease_epoch != lease_epoch:
        return f"stale lease: epoch {lease_epoch} is no longer this runner's lease of the job"
    if job.status == JobStatus.CANCELED:
        return "canceled"
    return f"job is {job.status}"


def job_heartbeat(
    *, runner: Runner, job_id: int, lease_epoch: int, status: str = ""
) -> HeartbeatAck:
    """Extend the lease for its current holder only; tell a canceled job's holder to stop."""
    runner_touch(runner=runner, status=status)
    until = timezone.now() + lease_ttl()
    extended = RunnerJob.objects.filter(
        pk=job_id, status=JobStatus.LEASED, leased_by=runner, lease_epoch=lease_epoch
    ).update(leased_until=until)
    if extended == 1:
        return HeartbeatAck(accepted=True)
    job = RunnerJob.objects.filter(pk=job_id).first()
    reason = _refusal(job, runner, lease_epoch)
    if not reason.startswith("job is"):
        # The holder's own heartbeat crossing its result is not a fenced-off call.
        metrics.fenced("heartbeat_job", reason)
    return HeartbeatAck(accepted=False, cancel=reason == "canceled", reason=reason)


def job_report_log(*, runner: Runner, job_id: int, lease_epoch: int, lines: Sequence[str]) -> Ack:
    """Append log lines to the job's run, read from the lease, never from the caller."""
    job = (
        RunnerJob.objects.filter(
            pk=job_id, status=JobStatus.LEASED, leased_by=runner, lease_epoch=lease_epoch
        )
        .only("pk", "run_id")
        .first()
    )
    if job is None:
        found = RunnerJob.objects.filter(pk=job_id).first()
        reason = _refusal(found, runner, lease_epoch)
        metrics.fenced("report_case_log", reason)
        return Ack(accepted=False, reason=reason)
    now = timezone.now()
    JobLogLine.objects.bulk_create(
        [
            JobLogLine(
                job_id=job.pk,
                run_id=job.run_id,
                epoch=lease_epoch,
                at=now,
                line=line.replace("\x00", "\ufffd"),
            )
            for line in lines
        ]
    )
    return Ack(accepted=True)


@dataclass(frozen=True)
class Outcome:
    """A result a runner reports for one fenced attempt, as the queue records it."""

    job_id: int
    lease_epoch: int
    succeeded: bool
    result_digest: str
    reason: str = ""


def jobs_settle(*, runner: Runner, outcomes: Sequence[Outcome]) -> list[Settlement]:
    """End fenced attempts with their reported results, one Settlement per outcome, in order.

    Call inside the caller's transaction, with the jobs' runs already locked. The job rows
    are locked in id order and written in a few statements whatever the number. The same
    result sent again by the attempt that settled its job is a duplicate: accepted, and
    nothing changes.
    """
    locked = RunnerJob.objects.select_for_update(of=("self",)).filter(
        pk__in=[o.job_id for o in outcomes]
    )
    jobs = {job.pk: job for job in locked.order_by("pk")}
    now = timezone.now()
    settlements: list[Settlement] = []
    ended: list[tuple[RunnerJob, Outcome]] = []
    for outcome in outcomes:
        job = jobs.get(outcome.job_id)
        if job is None or not _holds(job, runner, outcome.lease_epoch):
            settlements.append(_settle_refusal(job, runner, outcome))
            continue
        job.status = JobStatus.SUCCEEDED if outcome.succeeded else JobStatus.FAILED
        job.finished_at = now
        job.leased_until = None
        job.reason = outcome.reason[:500]
        ended.append((job, outcome))
        settlements.append(Settlement(accepted=True, job=job, ended=True))
    if ended:
        _record_settled(ended, now)
    return settlements


def _settle_refusal(job: RunnerJob | None, runner: Runner, outcome: Outcome) -> Settlement:
    if (
        job is not None
        and job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED)
        and job.leased_by_id == runner.pk
        and job.lease_epoch == outcome.lease_epoch
        and _current_attempt(job).filter(result_digest=outcome.result_digest).exists()
    ):
        return Settlement(accepted=True, reason="duplicate", job=job, duplicate=True)
    reason = _refusal(job, runner, outcome.lease_epoch)
    metrics.fenced("submit_job_result", reason)
    return Settlement(accepted=False, reason=reason)


def _record_settled(ended: list[tuple[RunnerJob, Outcome]], now: datetime) -> None:
    by_state: dict[tuple[str, str], list[int]] = {}
    for job, _ in ended:
        by_state.setdefault((job.status, job.reason), []).append(job.pk)
    for (status, reason), ids in by_state.items():
        RunnerJob.objects.filter(pk__in=ids).update(
            status=status, finished_at=now, leased_until=None, reason=reason
        )
        metrics.SETTLED.labels(status=status).inc(len(ids))
    _attempts_end(
        [
            (
                job.current_attempt_id,
                AttemptStatus.SUCCEEDED if outcome.succeeded else AttemptStatus.FAILED,
                outcome.result_digest,
                outcome.reason[:500],
            )
            for job, outcome in ended
            if job.current_attempt_id
        ],
        now,
    )


def _attempts_end(rows: list[tuple[int, str, str, str]], now: datetime) -> None:
    """End attempts, each with its own (status, result digest, reason): one statement."""
    if not rows:
        return
    table = JobAttempt._meta.db_table
    values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
    sql = (
        f"WITH ended(id, status, digest, reason) AS (VALUES {values})"
        f" UPDATE {table} SET status = ended.status, ended_at = %s,"
        f" result_digest = ended.digest, reason = ended.reason"
        f" FROM ended WHERE {table}.id = ended.id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [value for row in rows for value in row] + [now])


def job_fail(
    *, runner: Runner, job_id: int, lease_epoch: int, message: str, retryable: bool = False
) -> Settlement:
    """End the fenced attempt as failed: requeue it when retryable and attempts remain."""
    job = _locked_job(job_id)
    if job is None or not _holds(job, runner, lease_epoch):
        reason = _refusal(job, runner, lease_epoch)
        metrics.fenced("fail_job", reason)
        return Settlement(accepted=False, reason=reason)
    now = timezone.now()
    _current_attempt(job).update(status=AttemptStatus.FAILED, ended_at=now, reason=message[:500])
    if retryable and job.attempts < job.max_attempts:
        _requeue(job, now, "retryable_failure")
        return Settlement(accepted=True, job=job, requeued=True)
    _end(job, JobStatus.FAILED, message, now)
    return Settlement(accepted=True, job=job, ended=True)


def _requeue(job: RunnerJob, now: datetime, reason: str) -> None:
    metrics.REQUEUES.labels(reason=reason).inc()
    job.status = JobStatus.QUEUED
    job.leased_by = None
    job.leased_until = None
    job.queued_at = now
    RunnerJob.objects.filter(pk=job.pk).update(
        status=JobStatus.QUEUED, leased_by=None, leased_until=None, queued_at=now
    )
    wakeup.notify_owners([job.owner_id])


def _end(job: RunnerJob, status: str, reason: str, now: datetime) -> None:
    metrics.SETTLED.labels(status=status).inc()
    job.status = status
    job.finished_at = now
    job.leased_until = None
    job.reason = reason[:500]
    RunnerJob.objects.filter(pk=job.pk).update(
        status=status, finished_at=now, leased_until=None, reason=job.reason
    )


# ------------------------------------------------------------- admission and sweeps

_PARK_COLUMNS = (
    "owner_id",
    "runner_id",
    "run_id",
    "seq",
    "case_key",
    "batch_id",
    "payload",
    "required_capabilities",
    "status",
    "lease_epoch",
    "attempts",
    "max_attempts",
    "created_at",
    "queued_at",
    "reason",
)


def jobs_park(
    *,
    owner_id: int,
    runner_id: int | None,
    run_id: int,
    shared: dict[str, Any],
    cases: Iterable[tuple[str, Any]],
    required_capabilities: list[str],
    admit: int,
    max_attempts: int,
) -> int:
    """Insert one job per case, in order: the first `admit` queued, the rest pending.

    A dispatch of 10,000 cases is one COPY on PostgreSQL (one executemany on SQLite),
    not 10,000 round trips; what the jobs share is stored once, in their batch.
    """
    now = timezone.now()
    batch = JobBatch.objects.create(payload=shared, created_at=now)
    capabilities = json.dumps(sorted(required_capabilities))

    def rows() -> Iterator[tuple[Any, ...]]:
        for seq, (key, case_input) in enumerate(cases):
            queued = seq < admit
            yield (
                owner_id,
                runner_id,
                run_id,
                seq,
                key,
                batch.pk,
                json.dumps({"case": {"key": key, "input": case_input}}),
                capabilities,
                JobStatus.QUEUED if queued else JobStatus.PENDING,
                0,
                0,
                max_attempts,
                now,
                now if queued else None,
                "",
            )

    table = RunnerJob._meta.db_table
    count = 0
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            columns = ", ".join(_PARK_COLUMNS)
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows():
                    copy.write_row(row)
                    count += 1
        else:
            marks = ", ".join(["%s"] * len(_PARK_COLUMNS))
            sql = f"INSERT INTO {table} ({', '.join(_PARK_COLUMNS)}) VALUES ({marks})"
            materialized = list(rows())
            cursor.executemany(sql, materialized)
            count = len(materialized)
    if admit:
        wakeup.notify_owners([owner_id])
    return count


def jobs_admit(*, run_id: int, owner_id: int, limit: int) -> int:
    """Move up to `limit` of the run's pending jobs to the queue, in order (one statement)."""
    if limit <= 0:
        return 0
    next_ids = (
        RunnerJob.objects.filter(run_id=run_id, status=JobStatus.PENDING)
        .order_by("seq")
        .values("pk")[:limit]
    )
    admitted = RunnerJob.objects.filter(pk__in=Subquery(next_ids)).update(
        status=JobStatus.QUEUED, queued_at=timezone.now()
    )
    if admitted:
        wakeup.notify_owners([owner_id])
    return admitted


def run_active_count(run_id: int) -> int:
    """How many of the run's jobs are queued or leased (bounded by its concurrency)."""
    return RunnerJob.objects.filter(run_id=run_id, status__in=ACTIVE_JOB_STATUSES).count()


def run_has_pending(run_id: int) -> bool:
    return RunnerJob.objects.filter(run_id=run_id, status=JobStatus.PENDING).exists()


def run_job_counts(run_id: int) -> dict[str, int]:
    rows = (
        RunnerJob.objects.filter(run_id=run_id).values("status").annotate(n=Count("pk")).order_by()
    )
    counts = {status: 0 for status in JobStatus.values}
    counts.update({row["status"]: row["n"] for row in rows})
    return counts


def leases_expired() -> QuerySet[RunnerJob]:
    """Jobs whose holder went silent past its lease."""
    return RunnerJob.objects.filter(status=JobStatus.LEASED, leased_until__lt=timezone.now())


def lease_expire(*, job_id: int) -> Ended | None:
    """Expire this job's silent lease: requeue it, or fail it when out of attempts.

    None when the lease is no longer expired (a heartbeat or another scheduler got there
    first): the condition is re-checked under the row lock.
    """
    now = timezone.now()
    job = _locked_job(job_id)
    if job is None or job.status != JobStatus.LEASED or not job.leased_until:
        return None
    if job.leased_until >= now:
        return None
    _current_attempt(job).filter(status=AttemptStatus.EXECUTING).update(
        status=AttemptStatus.EXPIRED, ended_at=now, reason="no heartbeat within the lease"
    )
    if job.attempts < job.max_attempts:
        _requeue(job, now, "lease_expired")
        return Ended(requeued=[job])
    _end(job, JobStatus.FAILED, f"lease expired after {job.attempts} attempts", now)
    return Ended(jobs=[job])


def jobs_idle() -> QuerySet[RunnerJob]:
    """Queued jobs no runner took within the idle timeout."""
    cutoff = timezone.now() - timedelta(seconds=settings.EVERDICT_QUEUE_IDLE_TIMEOUT_S)
    return RunnerJob.objects.filter(status=JobStatus.QUEUED, queued_at__lt=cutoff)


def jobs_idle_expire(*, job_id: int) -> Ended | None:
    """Fail this idle job (`no_runner`) and its run's other queued and pending jobs."""
    job = _locked_job(job_id)
    if job is None or not jobs_idle().filter(pk=job_id).exists():
        return None
    now = timezone.now()
    ended = list(
        RunnerJob.objects.select_for_update(of=("self",))
        .filter(run_id=job.run_id, status__in=(JobStatus.QUEUED, JobStatus.PENDING))
        .order_by("seq")
    )
    RunnerJob.objects.filter(pk__in=[j.pk for j in ended]).update(
        status=JobStatus.FAILED, finished_at=now, reason="no_runner"
    )
    metrics.SETTLED.labels(status=JobStatus.FAILED).inc(len(ended))
    for j in ended:
        j.status, j.finished_at, j.reason = JobStatus.FAILED, now, "no_runner"
    return Ended(jobs=ended)


def jobs_of_revoked_runners() -> QuerySet[RunnerJob]:
    """Open jobs pinned to a runner that was revoked."""
    return RunnerJob.objects.filter(
        runner__revoked_at__isnull=False,
        status__in=(JobStatus.PENDING, JobStatus.QUEUED, JobStatus.LEASED),
    )


def jobs_of_revoked_runner_end(*, job_id: int) -> Ended | None:
    """End the open jobs of this job's run pinned to its revoked runner ("runner revoked")."""
    job = _locked_job(job_id)
    if job is None or not jobs_of_revoked_runners().filter(pk=job_id).exists():
        return None
    now = timezone.now()
    ended = list(
        jobs_of_revoked_runners()
        .select_for_update(of=("self",))
        .filter(run_id=job.run_id, runner_id=job.runner_id or 0)
    )
    executing = [j.current_attempt_id for j in ended if j.status == JobStatus.LEASED]
    JobAttempt.objects.filter(pk__in=executing, status=AttemptStatus.EXECUTING).update(
        status=AttemptStatus.FAILED, ended_at=now, reason="runner revoked"
    )
    RunnerJob.objects.filter(pk__in=[j.pk for j in ended]).update(
        status=JobStatus.FAILED, finished_at=now, leased_until=None, reason="runner revoked"
    )
    metrics.SETTLED.labels(status=JobStatus.FAILED).inc(len(ended))
    for j in ended:
        j.status, j.finished_at, j.reason = JobStatus.FAILED, now, "runner revoked"
    return Ended(jobs=ended)


def jobs_cancel(*, run_id: int) -> list[RunnerJob]:
    """Cancel the run's open jobs. A leased job's holder learns it on its next heartbeat."""
    now = timezone.now()
    jobs = list(
        RunnerJob.objects.select_for_update(of=("self",)).filter(
            run_id=run_id,
            status__in=(JobStatus.PENDING, JobStatus.QUEUED, JobStatus.LEASED),
        )
    )
    executing = [j.current_attempt_id for j in jobs if j.status == JobStatus.LEASED]
    JobAttempt.objects.filter(pk__in=executing, status=AttemptStatus.EXECUTING).update(
        status=AttemptStatus.CANCELED, ended_at=now, reason="canceled"
    )
    # leased_by and the epoch stay, so the holder's heartbeat is answered `cancel: true`.
    RunnerJob.objects.filter(pk__in=[j.pk for j in jobs]).update(
        status=JobStatus.CANCELED, finished_at=now, leased_until=None, reason="canceled"
    )
    return jobs


def job_requeue(*, job_id: int, reason: str) -> RunnerJob | None:
    """Put an open job back in the queue now (an operator's action); its attempt, if one is
    executing, is superseded so its runner's later calls are fenced off. None if closed."""
    job = _locked_job(job_id)
    if job is None or job.status not in (JobStatus.LEASED, JobStatus.QUEUED):
        return None
    now = timezone.now()
    if job.status == JobStatus.LEASED:
        _current_attempt(job).filter(status=AttemptStatus.EXECUTING).update(
            status=AttemptStatus.SUPERSEDED, ended_at=now, reason=reason[:500]
        )
        # Bumping the epoch fences the old holder even before anyone claims the job.
        RunnerJob.objects.filter(pk=job.pk).update(lease_epoch=F("lease_epoch") + 1)
        job.lease_epoch += 1
    _requeue(job, now, "operator")
    return job


def job_abort(*, job_id: int, reason: str) -> RunnerJob | None:
    """End an open job as failed (an operator's action). None if it was already closed."""
    job = _locked_job(job_id)
    if job is None or job.is_terminal:
        return None
    now = timezone.now()
    if job.status == JobStatus.LEASED:
        _current_attempt(job).filter(status=AttemptStatus.EXECUTING).update(
            status=AttemptStatus.FAILED, ended_at=now, reason=reason[:500]
        )
    _end(job, JobStatus.FAILED, reason, now)
    return job


def jobs_release_from(*, runner: Runner) -> list[RunnerJob]:
    """Requeue the `self:any` jobs a runner holds (it was revoked); its attempts are left to
    be superseded by the next claim. Jobs pinned to it are not touched."""
    jobs = list(
        RunnerJob.objects.select_for_update(of=("self",)).filter(
            status=JobStatus.LEASED, leased_by=runner, runner__isnull=True
        )
    )
    if jobs:
        metrics.REQUEUES.labels(reason="runner_revoked").inc(len(jobs))
        RunnerJob.objects.filter(pk__in=[j.pk for j in jobs]).update(
            status=JobStatus.QUEUED, leased_by=None, leased_until=None, queued_at=timezone.now()
        )
        wakeup.notify_owners([runner.owner_id])
    return jobs


def claim_plan(*, runner: Runner) -> list[Any]:
    """Return PostgreSQL's plan for the claim's SELECT (for tests and benchmarks)."""
    sql, params = _claim_select(runner, 1)
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        return ["\n".join(row[0] for row in cursor.fetchall())]
