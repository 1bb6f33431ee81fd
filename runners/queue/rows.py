"""Row-level helpers every queue primitive shares: the locked read, the attempt a job names,
and writes that keep a job object and its row in step."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import F, QuerySet

from runners import metrics, wakeup
from runners.models import AttemptStatus, JobAttempt, JobStatus, RunnerJob


def lease_ttl() -> timedelta:
    return timedelta(seconds=settings.EVERDICT_LEASE_TTL_S)


def resume_window() -> timedelta:
    return timedelta(seconds=settings.EVERDICT_RESUME_WINDOW_S)


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
    """Put leased jobs back in the queue (their epoch kept) and wake their owners' polls.

    The holder is forgotten: nothing it sends for this lease is honoured again.
    """
    if not jobs:
        return
    metrics.REQUEUES.labels(reason=reason).inc(len(jobs))
    write_all(jobs, status=JobStatus.QUEUED, leased_by=None, leased_until=None, queued_at=now)
    wakeup.notify_owners({job.owner_id for job in jobs})


def lapse(job: RunnerJob, now: datetime) -> None:
    """Put a job whose lease expired back in the queue, keeping its holder and the moment its
    lease lapsed (`leased_until`): the holder may resume it until another runner leases it.
    A job out of attempts is claimable by nobody else (the claim checks)."""
    metrics.REQUEUES.labels(reason="lease_expired").inc()
    write(job, status=JobStatus.QUEUED, queued_at=now)
    if job.attempts < job.max_attempts:
        wakeup.notify_owners([job.owner_id])


def resumable(job: RunnerJob, runner_id: int, lease_epoch: int, now: datetime) -> bool:
    """Whether the runner may take back this job's lapsed lease: it was its last holder, at
    this epoch, nobody leased it since, and — when its attempts are spent — the resume
    window has not passed."""
    return (
        job.status == JobStatus.QUEUED
        and job.leased_by_id == runner_id
        and job.lease_epoch == lease_epoch
        and job.leased_until is not None
        and (job.attempts < job.max_attempts or job.leased_until >= now - resume_window())
    )


def resume(job: RunnerJob, now: datetime) -> None:
    """Take back a lapsed lease for its holder (the job row is locked): the job is leased
    again at its epoch, and its expired attempt executes again with the gap recorded."""
    assert job.leased_until is not None
    gap_ms = max(0, int((now - job.leased_until).total_seconds() * 1000))
    JobAttempt.objects.filter(pk=job.current_attempt_id or 0).update(
        status=AttemptStatus.EXECUTING,
        ended_at=None,
        reason="",
        resumed_at=now,
        resumes=F("resumes") + 1,
        gap_ms=F("gap_ms") + gap_ms,
    )
    write(job, status=JobStatus.LEASED, leased_until=now + lease_ttl())
    metrics.RESUMES.inc()


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
