"""Row-level helpers every queue primitive shares: the locked read, the attempt a job names,
and writes that keep a job object and its row in step."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from runners import metrics, wakeup
from runners.models import AttemptStatus, JobAttempt, JobStatus, RunnerJob


def lease_ttl() -> timedelta:
    return timedelta(seconds=settings.EVERDICT_LEASE_TTL_S)


def locked_job(job_id: int) -> RunnerJob | None:
    return RunnerJob.objects.select_for_update(of=("self",)).filter(pk=job_id).first()


def current_attempt(job: RunnerJob) -> QuerySet[JobAttempt]:
    """The attempt the job names (none if it never had one)."""
    return JobAttempt.objects.filter(pk=job.current_attempt_id or 0)


def write(job: RunnerJob, **fields: Any) -> None:
    """Set plain values on the job and on its row together (one UPDATE)."""
    write_all([job], **fields)


def write_all(jobs: Sequence[RunnerJob], **fields: Any) -> None:
    """Set the same plain values on these jobs and their rows (one UPDATE)."""
    if not jobs:
        return
    RunnerJob.objects.filter(pk__in=[job.pk for job in jobs]).update(**fields)
    for job in jobs:
        for name, value in fields.items():
            setattr(job, name, value)


def requeue(jobs: Sequence[RunnerJob], now: datetime, reason: str) -> None:
    """Put leased jobs back in the queue (their epoch kept) and wake their owners' polls."""
    if not jobs:
        return
    metrics.REQUEUES.labels(reason=reason).inc(len(jobs))
    write_all(jobs, status=JobStatus.QUEUED, leased_by=None, leased_until=None, queued_at=now)
    wakeup.notify_owners({job.owner_id for job in jobs})


def end(jobs: Sequence[RunnerJob], status: str, reason: str, now: datetime) -> None:
    """End jobs in a terminal state with a reason."""
    if not jobs:
        return
    metrics.SETTLED.labels(status=status).inc(len(jobs))
    write_all(jobs, status=status, finished_at=now, leased_until=None, reason=reason[:500])


def end_attempts(
    attempt_ids: Sequence[int | None], status: str, reason: str, now: datetime
) -> None:
    """End these attempts that are still executing, all in the same state."""
    ids = [pk for pk in attempt_ids if pk]
    if ids:
        JobAttempt.objects.filter(pk__in=ids, status=AttemptStatus.EXECUTING).update(
            status=status, ended_at=now, reason=reason[:500]
        )
