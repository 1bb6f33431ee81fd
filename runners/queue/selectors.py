"""Reads of the queue: counts per run, and the candidates of each sweep."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.db.models import Count, QuerySet
from django.utils import timezone

from runners.models import ACTIVE_JOB_STATUSES, JobStatus, RunnerJob

OPEN_JOB_STATUSES = (JobStatus.PENDING, JobStatus.QUEUED, JobStatus.LEASED)


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


def jobs_idle() -> QuerySet[RunnerJob]:
    """Queued jobs no runner took within the idle timeout."""
    cutoff = timezone.now() - timedelta(seconds=settings.EVERDICT_QUEUE_IDLE_TIMEOUT_S)
    return RunnerJob.objects.filter(status=JobStatus.QUEUED, queued_at__lt=cutoff)


def jobs_of_revoked_runners() -> QuerySet[RunnerJob]:
    """Open jobs pinned to a runner that was revoked."""
    return RunnerJob.objects.filter(
        runner__revoked_at__isnull=False,
        status__in=OPEN_JOB_STATUSES,
    )
