"""The claim: lease the oldest claimable jobs to a runner, each with a new attempt, at once.

Two implementations of one rule: plain SQL on PostgreSQL (every lease's path, where the
ORM's compilation cost more than the database's work), and the ORM under SQLite's single
writer, which has no JSON containment for the capability filter.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Exists, F, OuterRef, Q, Subquery
from django.utils import timezone

from core import prebuilt
from runnercli.protocol import MAX_JOBS_PER_LEASE, CaseJob, Lease
from runners import metrics
from runners.models import AttemptStatus, JobAttempt, JobBatch, JobStatus, Runner, RunnerJob
from runners.presence import runner_touch
from runners.queue.rows import lease_ttl

# SQLite has no JSON containment: claims filter a batch of candidates in Python.
_SQLITE_CANDIDATE_BATCH = 200


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


def job_lease(
    *,
    runner: Runner,
    capabilities: Sequence[str] | None = None,
    status: str = "",
    max_jobs: int = 1,
    features: tuple[int, Sequence[str]] | None = None,
) -> list[LeasedJob]:
    """Claim up to `max_jobs` of the oldest claimable jobs for this runner, in one transaction.

    Each claim bumps the job's epoch, supersedes the attempt the job names if it is still
    executing, inserts the new executing attempt and points the job at it. All or nothing:
    a claim whose ledger write fails rolls back and leaves the job claimable. `features` is
    the `(protocol, features)` the runner reports now: a job needing a feature it lacks is
    left for another.
    """
    if capabilities is not None:
        runner.update_capabilities(capabilities)
    if features is not None:
        runner.update_features(*features)
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


def _claimable_filter(runner: Runner, now: datetime) -> Q:
    # A runner revoked or paused while its long-poll was parked holds a stale row: the claim
    # checks in the same statement (evaluated once, as an init plan) that it may lease.
    may_lease = Exists(
        Runner.objects.filter(pk=runner.pk, revoked_at__isnull=True).exclude(paused_until__gt=now)
    )
    return (
        Q(status=JobStatus.QUEUED, owner_id=runner.owner_id)
        & (Q(runner_id=runner.pk) | Q(runner__isnull=True))
        # A lapsed lease out of attempts is its holder's alone to resume.
        & (Q(attempts__lt=F("max_attempts")) | Q(leased_by__isnull=True))
        & Q(may_lease)
    )


def _claimable(runner: Runner, limit: int) -> list[RunnerJob]:
    """The claim's candidates on SQLite, whose IMMEDIATE transaction already holds the single
    write lock; it has no JSON containment, so capabilities and features are filtered here in
    batches, on the candidates' ids and needs alone. Only the jobs chosen are read whole,
    with their batch: a run's queue holds up to its concurrency of jobs, each naming the
    batch's shared harness, and a claim takes a few."""
    base = RunnerJob.objects.filter(_claimable_filter(runner, timezone.now())).order_by(
        "created_at", "id"
    )
    have = set(runner.capabilities or [])
    chosen: list[int] = []
    offset = 0
    while len(chosen) < limit:
        batch = list(
            base.values_list("pk", "required_capabilities", "needs_features")[
                offset : offset + _SQLITE_CANDIDATE_BATCH
            ]
        )
        chosen.extend(
            pk
            for pk, needs, features in batch
            if set(needs or []) <= have and runner.has_features(features)
        )
        if len(batch) < _SQLITE_CANDIDATE_BATCH:
            break
        offset += _SQLITE_CANDIDATE_BATCH
    if not chosen:
        return []
    return list(base.filter(pk__in=chosen[:limit]).select_related("batch"))


def _claim_select(runner: Runner, limit: int) -> tuple[str, list[Any]]:
    """The claim's SELECT on PostgreSQL: the partial index on (owner, created_at, id) WHERE
    status='queued' serves it; SKIP LOCKED lets concurrent claimers pass each other; a
    runner revoked or paused while its poll was parked holds a stale row, so whether it may
    lease is checked in the same statement; a lapsed lease out of attempts is left to its
    holder."""
    columns = ", ".join(f"j.{column}" for column in _JOB_COLUMNS)
    sql = (
        f"SELECT {columns}, b.payload FROM {RunnerJob._meta.db_table} j"
        f" JOIN {JobBatch._meta.db_table} b ON b.id = j.batch_id"
        # The status written out, not a parameter: the claim runs prepared, and only a
        # literal lets its generic plan match the partial index's predicate.
        f" WHERE j.owner_id = %s AND j.status = '{JobStatus.QUEUED.value}'"
        " AND (j.runner_id = %s OR j.runner_id IS NULL)"
        " AND j.required_capabilities <@ %s::jsonb"
        " AND j.needs_features <@ %s::jsonb"
        " AND (j.attempts < j.max_attempts OR j.leased_by_id IS NULL)"
        f" AND EXISTS (SELECT 1 FROM {Runner._meta.db_table} r"
        " WHERE r.id = %s AND r.revoked_at IS NULL"
        " AND (r.paused_until IS NULL OR r.paused_until <= %s))"
        " ORDER BY j.created_at, j.id LIMIT %s"
        " FOR UPDATE OF j SKIP LOCKED"
    )
    params = [
        runner.owner_id,
        runner.pk,
        json.dumps(sorted(runner.capabilities or [])),
        json.dumps(sorted(runner.features or [])),
        runner.pk,
        timezone.now(),
        limit,
    ]
    return sql, params


def _claim_postgres(runner: Runner, limit: int) -> list[LeasedJob]:
    """The claim on PostgreSQL in two statements of plain SQL (three when a predecessor
    attempt is still executing).

    The same claim as `_claimable` + `_grant`: the oldest claimable jobs, skipping locked
    ones, over the partial claim index; the runner still active; each job's epoch bumped
    and pointed at a new executing attempt.
    """
    job_table = RunnerJob._meta.db_table
    with prebuilt.cursor(connection.alias) as cursor:
        cursor.execute(*_claim_select(runner, limit))
        jobs = [_job_from_row(row) for row in cursor.fetchall()]
        if not jobs:
            return []
        now = timezone.now()
        until = now + lease_ttl()
        _supersede_predecessors(jobs, now)
        ids = [job.pk for job in jobs]
        # The jobs are found again by their ids alone: the SELECT above holds them locked,
        # read queued, till this transaction ends. (Their status asked again would be matched
        # against the partial index of queued jobs, which a planner whose statistics trail
        # the table reads whole, entries of every job leased since the last vacuum.)
        cursor.execute(
            f"WITH opened AS ("
            f"  INSERT INTO {JobAttempt._meta.db_table}"
            "   (job_id, epoch, runner_id, status, started_at, ended_at, reason, result_digest)"
            f"  SELECT id, lease_epoch + 1, %s, %s, %s, NULL, '', '' FROM {job_table}"
            "   WHERE id = ANY(%s) RETURNING id, job_id)"
            f" UPDATE {job_table} j SET status = %s, leased_by_id = %s, leased_until = %s,"
            " lease_epoch = j.lease_epoch + 1, attempts = j.attempts + 1,"
            " current_attempt_id = opened.id"
            " FROM opened WHERE j.id = opened.job_id AND j.id = ANY(%s)"
            " RETURNING j.id, opened.id",
            [
                runner.pk,
                AttemptStatus.EXECUTING,
                now,
                ids,
                JobStatus.LEASED,
                runner.pk,
                until,
                ids,
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


def claim_plan(*, runner: Runner, generic: bool = False) -> list[Any]:
    """Return PostgreSQL's plan for the claim's SELECT (for tests and benchmarks): for these
    parameters, or `generic`, the plan a connection that prepared the claim may keep."""
    sql, params = _claim_select(runner, 1)
    if generic:
        return [prebuilt.generic_plan(connection.alias, sql, params)]
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        return ["\n".join(row[0] for row in cursor.fetchall())]
