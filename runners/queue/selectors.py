"""Reads of the queue: counts per run, and the candidates of each sweep."""

from __future__ import annotations

from django.db import connection
from django.db.models import Count, F, QuerySet
from django.utils import timezone

from core import prebuilt
from runners.models import ACTIVE_JOB_STATUSES, JobKind, JobStatus, RunnerJob
from runners.queue.rows import resume_window

OPEN_JOB_STATUSES = (JobStatus.PENDING, JobStatus.QUEUED, JobStatus.LEASED)


def run_active_count(run_id: int) -> int:
    """How many of the run's jobs are queued or leased (bounded by its concurrency)."""
    return RunnerJob.objects.filter(
        run_id=run_id, kind=JobKind.CASE, status__in=ACTIVE_JOB_STATUSES
    ).count()


def run_load(run_id: int) -> tuple[int, bool]:
    """How many of the run's case jobs are queued or leased, and whether any is pending
    (waiting for admission): one statement, through the (run, status, seq) index and the
    partial index of pending jobs. Judge jobs are outside the run's concurrency, so they are
    not counted."""
    sql, params = _load(run_id)
    with prebuilt.cursor(connection.alias) as cursor:
        cursor.execute(sql, params)
        count, pending = cursor.fetchone()
    return int(count), bool(pending)


def run_load_plan(run_id: int) -> str:
    """PostgreSQL's plan for `run_load` as a connection keeps it prepared (for tests)."""
    return prebuilt.generic_plan(connection.alias, *_load(run_id))


def _load(run_id: int) -> tuple[str, list[object]]:
    """The statuses and the kind are literals: the plan a connection keeps weighs them by the
    table's statistics (queued and leased jobs are few) and reads the run's jobs by status,
    through (run, status, seq) and the partial index of pending jobs, not all of its jobs."""
    table = RunnerJob._meta.db_table
    active = ", ".join(f"'{status.value}'" for status in ACTIVE_JOB_STATUSES)
    sql = (
        f"SELECT (SELECT COUNT(*) FROM {table} WHERE run_id = %s AND status IN ({active})"
        f" AND kind = '{JobKind.CASE.value}'),"
        f" EXISTS (SELECT 1 FROM {table} WHERE run_id = %s"
        f" AND status = '{JobStatus.PENDING.value}')"
    )
    return sql, [run_id, run_id]


def run_judges_open(run_id: int) -> bool:
    """Whether a judge job of the run is still queued or leased."""
    return RunnerJob.objects.filter(
        run_id=run_id, kind=JobKind.JUDGE, status__in=ACTIVE_JOB_STATUSES
    ).exists()


def run_has_pending(run_id: int) -> bool:
    return RunnerJob.objects.filter(run_id=run_id, status=JobStatus.PENDING).exists()


def run_job_counts(run_id: int) -> dict[str, int]:
    rows = (
        RunnerJob.objects.filter(run_id=run_id, kind=JobKind.CASE)
        .values("status")
        .annotate(n=Count("pk"))
        .order_by()
    )
    counts = {status: 0 for status in JobStatus.values}
    counts.update({row["status"]: row["n"] for row in rows})
    return counts


def leases_expired() -> QuerySet[RunnerJob]:
    """Jobs whose holder went silent past its lease."""
    return RunnerJob.objects.filter(status=JobStatus.LEASED, leased_until__lt=timezone.now())


def leases_lapsed_for_good() -> QuerySet[RunnerJob]:
    """Jobs whose last attempt's lease lapsed longer than the resume window ago: nobody may
    claim them (their attempts are spent) and their holder can no longer resume them."""
    return RunnerJob.objects.filter(
        status=JobStatus.QUEUED,
        leased_by__isnull=False,
        attempts__gte=F("max_attempts"),
        leased_until__lt=timezone.now() - resume_window(),
    )


def not_held(jobs: QuerySet[RunnerJob]) -> QuerySet[RunnerJob]:
    """Leave out the jobs a sweep set aside after it raised on them, until their hold ends."""
    return jobs.exclude(sweep_held_until__gt=timezone.now())


def jobs_of_revoked_runners() -> QuerySet[RunnerJob]:
    """Open jobs pinned to a runner that was revoked."""
    return RunnerJob.objects.filter(
        runner__revoked_at__isnull=False,
        status__in=OPEN_JOB_STATUSES,
    )
