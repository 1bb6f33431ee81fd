"""Admission: a dispatch parks its jobs, and a run's pending jobs enter the queue in order as
earlier ones end, keeping at most `concurrency` of them queued or leased."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Max, Subquery
from django.utils import timezone

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

    A dispatch of 10,000 cases is one COPY on PostgreSQL (one executemany on SQLite),
    not 10,000 round trips; what the jobs share is stored once, in their batch.
    """
    now = timezone.now()
    batch = JobBatch.objects.create(payload=shared, created_at=now)
    capabilities = json.dumps(sorted(required_capabilities))
    features = json.dumps(sorted(needs_features))

    def rows() -> Iterator[tuple[Any, ...]]:
        for seq, (key, repeat, payload) in enumerate(jobs):
            queued = seq < admit
            yield (
                owner_id,
                runner_id,
                run_id,
                seq,
                key,
                repeat,
                batch.pk,
                json.dumps(payload),
                capabilities,
                features,
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
