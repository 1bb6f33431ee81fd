"""Admission: a dispatch parks its jobs, and a run's pending jobs enter the queue in order as
earlier ones end, keeping at most `concurrency` of them queued or leased."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from itertools import chain, islice
from typing import Any

from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from core import prebuilt
from runners import wakeup
from runners.models import JobBatch, JobKind, JobStatus, RunnerJob

_PARK_COLUMNS = (
    "owner_id",
    "runner_id",
    "run_id",
    "seq",
    "case_key",
    "repeat",
    "batch_id",
    "payload",
    "required_capabilities",
    "needs_features",
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
    jobs: Iterable[tuple[str, int, dict[str, Any]]],
    required_capabilities: Sequence[str],
    needs_features: Sequence[str] = (),
    admit: int,
    max_attempts: int,
) -> int:
    """Insert one job per `(case key, repeat, payload)`, in order: the first `admit` queued,
    the rest pending. `shared` and each payload are the caller's parts of what the runner is
    sent; the queue stores them as they are.

    The statements are the same whatever the number of jobs, none per job: on PostgreSQL a
    dispatch of up to `_PARK_INLINE` jobs is one statement with its batch and its wake-up,
    a larger one the batch with its wake-up and one COPY; on SQLite a batch insert and one
    executemany.
    What the jobs share is stored once, in their batch.
    """
    alias = RunnerJob.objects.db
    job_rows = _ParkRows.of(
        owner_id, runner_id, run_id, required_capabilities, needs_features, admit, max_attempts
    )
    jobs = iter(jobs)
    head = list(islice(jobs, _PARK_INLINE + 1))
    if not head:
        return 0
    if connection.vendor != "postgresql":
        batch = prebuilt.insert(JobBatch(payload=shared, created_at=job_rows.now), alias)
        count = _park_many(job_rows, batch.pk, chain(head, jobs))
    elif len(head) <= _PARK_INLINE:
        _park_inline(alias, job_rows, shared, head)
        count = len(head)
    else:
        count = _park_many(job_rows, _batch_notifying(alias, job_rows, shared), chain(head, jobs))
    job_rows.at_commit(count)
    return count


# Up to this many jobs go in one statement with their batch; COPY is faster past it.
_PARK_INLINE = 64

# A park of more jobs than ANALYZE_THRESHOLD + ANALYZE_SCALE times the rows the jobs' statistics
# count has the table analysed at its commit: autovacuum's own rule for a table's next
# ANALYZE (its default threshold and scale factor), applied at once.
ANALYZE_THRESHOLD = 50
ANALYZE_SCALE = 0.1


def analyse_if_outgrown(parked: int) -> bool:
    """Gather the jobs' statistics again if `parked` jobs outgrew them (PostgreSQL); return
    whether it did.

    A run's load counts its queued and leased jobs through the (run, status, seq) index only
    while the planner knows the run holds many jobs; on statistics from before a large run
    (a new install, a first large run) it ties that index with (run, seq) and may read every
    job of the run for each batch settled, in the plans that connections keep prepared.
    Autovacuum mends that at its next pass, within a minute, or never where it is off: this
    mends it now. ANALYZE samples at most a bounded number of rows, and skips the table
    rather than wait while another ANALYZE or VACUUM holds it.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [RunnerJob._meta.db_table]
        )
        row = cursor.fetchone()
        known = max(float(row[0]), 0.0) if row else 0.0
        if parked <= ANALYZE_THRESHOLD + ANALYZE_SCALE * known:
            return False
        cursor.execute(f"ANALYZE (SKIP_LOCKED) {prebuilt.table(RunnerJob, connection.alias)}")
    return True


@dataclass(frozen=True)
class _ParkRows:
    """What a dispatch's jobs share but their batch, their place and their own part."""

    owner_id: int
    runner_id: int | None
    run_id: int | None  # None: the run the statement inserts, `r.id`
    capabilities: str
    features: str
    admit: int
    max_attempts: int
    now: datetime

    @classmethod
    def of(
        cls,
        owner_id: int,
        runner_id: int | None,
        run_id: int | None,
        required_capabilities: Sequence[str],
        needs_features: Sequence[str],
        admit: int,
        max_attempts: int,
    ) -> _ParkRows:
        """A dispatch's, parked now."""
        return cls(
            owner_id=owner_id,
            runner_id=runner_id,
            run_id=run_id,
            capabilities=json.dumps(sorted(required_capabilities)),
            features=json.dumps(sorted(needs_features)),
            admit=admit,
            max_attempts=max_attempts,
            now=timezone.now(),
        )

    def job_params(self) -> list[Any]:
        """The values of `_jobs_cte`, in order."""
        params: list[Any] = [self.owner_id, self.runner_id]
        params += [] if self.run_id is None else [self.run_id]
        params += [self.capabilities, self.features, self.admit, self.max_attempts, self.now]
        return [*params, self.admit, self.now]

    def at_commit(self, count: int) -> None:
        """After `count` jobs parked: this process's waiters wake at commit (PostgreSQL's
        NOTIFY went with the jobs' statement), and then, when the park outgrew the jobs'
        statistics, they are gathered again (`analyse_if_outgrown`)."""
        if count and self.admit:
            transaction.on_commit(lambda: wakeup.hub.wake([self.owner_id]))
        if connection.vendor == "postgresql" and count > ANALYZE_THRESHOLD:
            transaction.on_commit(lambda: analyse_if_outgrown(count), robust=True)

    def rows(
        self, batch_id: int, jobs: Iterable[tuple[str, int, dict[str, Any]]]
    ) -> Iterator[tuple[Any, ...]]:
        for seq, (key, repeat, payload) in enumerate(jobs):
            queued = seq < self.admit
            yield (
                self.owner_id,
                self.runner_id,
                self.run_id,
                seq,
                key,
                repeat,
                batch_id,
                json.dumps(payload),
                self.capabilities,
                self.features,
                JobStatus.QUEUED if queued else JobStatus.PENDING,
                0,
                0,
                self.max_attempts,
                self.now,
                self.now if queued else None,
                "",
            )


def _jobs_cte(alias: str, *, run: str, key: str, repeat: str, payload: str, rows: str) -> str:
    """The CTE `j`: a job of the batch `b` per row of `rows` (a FROM clause naming `v.seq`,
    its place), its run, case key, repeat and own part the SQL given, the first `admit`
    queued; `_ParkRows.job_params` are its values (the run's id among them when `run` is
    `%s`), then those of `rows`."""
    columns = ", ".join(prebuilt.column(RunnerJob, c, alias) for c in _PARK_COLUMNS)
    return (
        f"j AS (INSERT INTO {prebuilt.table(RunnerJob, alias)} ({columns}) "
        f"SELECT %s, %s, {run}, v.seq, {key}, {repeat}, b.id, {payload}, "
        "%s::jsonb, %s::jsonb, "
        f"CASE WHEN v.seq < %s THEN '{JobStatus.QUEUED.value}' "
        f"ELSE '{JobStatus.PENDING.value}' END, "
        f"0, 0, %s, %s, CASE WHEN v.seq < %s THEN %s::timestamptz END, '' FROM {rows} "
        f"RETURNING {prebuilt.column(RunnerJob, 'id', alias)})"
    )


def _batch_columns(alias: str) -> str:
    return ", ".join(prebuilt.column(JobBatch, c, alias) for c in ("payload", "created_at"))


@cache
def _park_inline_sql(alias: str) -> str:
    jobs = _jobs_cte(
        alias,
        run="%s",
        key="v.case_key",
        repeat="v.repeat",
        payload="v.payload::jsonb",
        rows="b, unnest(%s::int[], %s::text[], %s::int[], %s::text[]) "
        "AS v(seq, case_key, repeat, payload)",
    )
    return (
        f"WITH b AS (INSERT INTO {prebuilt.table(JobBatch, alias)} ({_batch_columns(alias)}) "
        f"VALUES (%s::jsonb, %s) RETURNING {prebuilt.column(JobBatch, 'id', alias)} AS id), "
        f"{jobs} "
        # The wake-up is sent at commit, whichever statement of the transaction asks.
        "SELECT pg_notify(%s, %s) WHERE %s"
    )


@cache
def _batch_sql(alias: str) -> str:
    return (
        f"WITH b AS ({prebuilt.insert_sql(JobBatch, alias)}) "
        f"SELECT b.{prebuilt.column(JobBatch, 'id', alias)}, "
        "(SELECT pg_notify(%s, %s) WHERE %s) FROM b"
    )


def _batch_notifying(alias: str, park: _ParkRows, shared: dict[str, Any]) -> int:
    """Insert the jobs' batch and send the owner's wake-up in one statement (PostgreSQL)."""
    batch = JobBatch(payload=shared, created_at=park.now)
    params = prebuilt.insert_params(batch, alias)
    params += [wakeup.CHANNEL, str(park.owner_id), park.admit > 0]
    with prebuilt.cursor(alias) as cursor:
        cursor.execute(_batch_sql(alias), params)
        batch_id: int = cursor.fetchone()[0]
    return batch_id


def _park_inline(
    alias: str, park: _ParkRows, shared: dict[str, Any], jobs: list[tuple[str, int, dict[str, Any]]]
) -> None:
    """The batch, its jobs and the owner's wake-up in one statement (PostgreSQL)."""
    params: list[Any] = [json.dumps(shared), park.now, *park.job_params(), list(range(len(jobs)))]
    params += [[key for key, _, _ in jobs], [repeat for _, repeat, _ in jobs]]
    params += [[json.dumps(payload) for _, _, payload in jobs]]
    params += [wakeup.CHANNEL, str(park.owner_id), park.admit > 0]
    with prebuilt.cursor(alias) as cursor:
        cursor.execute(_park_inline_sql(alias), params)


@dataclass(frozen=True)
class ParkWithRun:
    """A dispatch's jobs parked by the statement that inserts their run (PostgreSQL): `sql`
    holds the CTEs `b` (their batch, the run's id written into what they share) and `j` (one
    job per case and repeat, in order), read from the CTEs `r` (the run: `id`) and `cases`
    (`case_key`, `case_input`, `hidden`, `n`: its place from 0, `total`) written before them;
    `columns` the two select-list entries (the jobs parked, the owner's wake-up). `params`
    are the CTEs' and then the columns' own, in that order."""

    sql: str
    columns: str
    params: list[Any]
    rows: _ParkRows

    def parked(self, count: int) -> int:
        """After the statement: `count` jobs parked; at commit, this process's waiters wake
        (and the jobs' statistics are gathered again, when the park outgrew them)."""
        self.rows.at_commit(count)
        return count


def parks_with_run(jobs: int) -> bool:
    """Whether a dispatch of `jobs` jobs is parked by its run's own statement."""
    return connection.vendor == "postgresql" and jobs <= _PARK_INLINE


def jobs_park_with_run(
    *,
    owner_id: int,
    runner_id: int | None,
    shared: dict[str, Any],
    repeats: int,
    required_capabilities: Sequence[str],
    needs_features: Sequence[str] = (),
    admit: int,
    max_attempts: int,
) -> ParkWithRun:
    """What parks one job per case and repeat of a run not inserted yet, every case once then
    again for each repeat, the first `admit` queued: the jobs `jobs_park` would write, each
    job's own part (`repeat`, `case`, `hidden` when the case has hidden files) written by the
    statement from the case as stored."""
    rows = _ParkRows.of(
        owner_id, runner_id, None, required_capabilities, needs_features, admit, max_attempts
    )
    params: list[Any] = [json.dumps(shared), rows.now, *rows.job_params(), list(range(repeats))]
    params += [wakeup.CHANNEL, str(owner_id), admit > 0]
    sql, columns = _park_with_run_sql(RunnerJob.objects.db)
    return ParkWithRun(sql=sql, columns=columns, params=params, rows=rows)


@cache
def _park_with_run_sql(alias: str) -> tuple[str, str]:
    own = (
        "jsonb_build_object('repeat', v.rep, 'case', "
        "jsonb_build_object('key', cases.case_key, 'input', cases.case_input)) || CASE WHEN "
        "jsonb_typeof(cases.hidden) = 'object' AND cases.hidden <> '{}'::jsonb "
        "THEN jsonb_build_object('hidden', cases.hidden) ELSE '{}'::jsonb END"
    )
    jobs = _jobs_cte(
        alias,
        run="r.id",
        key="cases.case_key",
        repeat="v.rep",
        payload=own,
        # The repeats as an array: PostgreSQL guesses 1,000 rows of `generate_series` over
        # a parameter, so its generic plan looked dearer and it planned every run afresh.
        rows="r, b, cases, unnest(%s::int[]) AS g(rep), "
        "LATERAL (SELECT g.rep, g.rep * cases.total + cases.n AS seq) AS v "
        # In order: the claim walks a dispatch's jobs by id.
        "ORDER BY v.seq",
    )
    ctes = (
        f"b AS (INSERT INTO {prebuilt.table(JobBatch, alias)} ({_batch_columns(alias)}) "
        "SELECT jsonb_set(%s::jsonb, '{run_id}', to_jsonb(r.id)), %s FROM r "
        f"RETURNING {prebuilt.column(JobBatch, 'id', alias)} AS id), {jobs}"
    )
    # The wake-up is sent at commit, whichever statement of the transaction asks.
    selected = (
        "(SELECT count(*) FROM j), (SELECT pg_notify(%s, %s) WHERE %s AND EXISTS (SELECT FROM j))"
    )
    return ctes, selected


def _park_many(
    park: _ParkRows, batch_id: int, jobs: Iterable[tuple[str, int, dict[str, Any]]]
) -> int:
    table = RunnerJob._meta.db_table
    count = 0
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            columns = ", ".join(_PARK_COLUMNS)
            with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in park.rows(batch_id, jobs):
                    copy.write_row(row)
                    count += 1
        else:
            marks = ", ".join(["%s"] * len(_PARK_COLUMNS))
            sql = f"INSERT INTO {table} ({', '.join(_PARK_COLUMNS)}) VALUES ({marks})"
            materialized = list(park.rows(batch_id, jobs))
            cursor.executemany(sql, materialized)
            count = len(materialized)
    return count


@cache
def _admit_sql(alias: str) -> str:
    """The run's next pending jobs, in order, queued: written once per process. The statuses
    are literals, so that the plan a connection keeps can read the partial index of pending
    jobs."""
    table = prebuilt.table(RunnerJob, alias)

    def col(name: str) -> str:
        return prebuilt.column(RunnerJob, name, alias)

    return (
        f"UPDATE {table} SET {col('status')} = '{JobStatus.QUEUED.value}', "
        f"{col('queued_at')} = %s "
        f"WHERE {col('id')} IN (SELECT {col('id')} FROM {table} "
        f"WHERE {col('run')} = %s AND {col('status')} = '{JobStatus.PENDING.value}' "
        f"ORDER BY {col('seq')} LIMIT %s)"
    )


def jobs_admit(*, run_id: int, owner_id: int, limit: int) -> int:
    """Move up to `limit` of the run's pending jobs to the queue, in order (one statement)."""
    if limit <= 0:
        return 0
    with prebuilt.cursor(connection.alias) as cursor:
        cursor.execute(_admit_sql(connection.alias), [timezone.now(), run_id, limit])
        admitted = cursor.rowcount
    if admitted:
        wakeup.notify_owners([owner_id])
    return admitted


def admit_plan(run_id: int, limit: int) -> str:
    """PostgreSQL's plan for `jobs_admit` as a connection keeps it prepared (for tests)."""
    alias = connection.alias
    return prebuilt.generic_plan(alias, _admit_sql(alias), [timezone.now(), run_id, limit])


def judge_jobs_queue(
    *,
    owner_id: int,
    runner_id: int | None,
    run_id: int,
    shared: dict[str, Any],
    payloads: Iterable[tuple[str, int, dict[str, Any]]],
    required_capabilities: Sequence[str],
    needs_features: Sequence[str],
    place: datetime,
    max_attempts: int,
) -> list[RunnerJob]:
    """Queue one judge job per `(case key, repeat, payload)` at once, outside admission.

    `place` is their case job's creation time: the claim walks the queue by creation, so a
    judge job takes its case's place, ahead of every case queued after it (and of every
    pending one). A dispatch's jobs share one creation time, so a judge job stands a
    microsecond before it: ahead of its run's other cases, behind earlier runs' jobs. The
    caller holds the run's row lock, so the seq taken here is free.
    """
    place -= timedelta(microseconds=1)
    now = timezone.now()
    batch = JobBatch.objects.create(payload=shared, created_at=now)
    last = RunnerJob.objects.filter(run_id=run_id).aggregate(last=Max("seq"))["last"]
    jobs = [
        RunnerJob(
            owner_id=owner_id,
            runner_id=runner_id,
            run_id=run_id,
            seq=seq,
            case_key=key,
            repeat=repeat,
            batch=batch,
            payload=payload,
            required_capabilities=sorted(required_capabilities),
            needs_features=sorted(needs_features),
            kind=JobKind.JUDGE,
            status=JobStatus.QUEUED,
            max_attempts=max_attempts,
            created_at=place,
            queued_at=now,
        )
        for seq, (key, repeat, payload) in enumerate(payloads, start=(last or 0) + 1)
    ]
    RunnerJob.objects.bulk_create(jobs)
    if jobs:
        wakeup.notify_owners([owner_id])
    return jobs
