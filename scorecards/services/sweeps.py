"""The scheduler's steps and the operators' actions: expire silent leases, end lapsed ones past
the resume window, settle the jobs of revoked runners, end idle queues, complete finished
runs; requeue or fail one job.

Each step handles one candidate in one transaction, its run's row locked first (the lock
order everywhere). On PostgreSQL a run locked by someone else — another scheduler, a
settlement — is skipped (SKIP LOCKED): several schedulers share the work instead of queueing
on one run. A candidate that raises is set aside (counted, its error kept, held for a while,
longer each time) and the step goes on with the others.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from core.transient import transient_cause
from runners import metrics, queue
from runners.models import JobStatus, Runner, RunnerJob
from scorecards.models import EventLevel, Run, RunStatus
from scorecards.services.events import event
from scorecards.services.results import locked_run_of, record_error, run_advance, run_complete

if TYPE_CHECKING:
    from django.contrib.auth.models import User

log = logging.getLogger("everdict.scheduler")

OPEN_JOB_STATUSES = (JobStatus.PENDING, JobStatus.QUEUED, JobStatus.LEASED)


def _pick(candidates: QuerySet[RunnerJob]) -> tuple[Run, int] | None:
    """A candidate job and its run, the run locked — skipping, on PostgreSQL, runs whose lock
    someone else holds — and the jobs set aside left out."""
    candidates = queue.not_held(candidates)
    if connection.vendor != "postgresql":
        # SQLite's IMMEDIATE transaction already holds the single write lock.
        job_id = candidates.order_by("pk").values_list("pk", flat=True).first()
        run = locked_run_of(job_id) if job_id is not None else None
        return (run, job_id) if run is not None and job_id is not None else None
    run = (
        Run.objects.select_for_update(skip_locked=True, of=("self",))
        .select_related("harness", "submitted_by", "runner")
        .filter(pk__in=candidates.values("run_id"))
        .order_by("pk")
        .first()
    )
    if run is None:
        return None
    job_id = candidates.filter(run_id=run.pk).order_by("pk").values_list("pk", flat=True).first()
    return (run, job_id) if job_id is not None else None


def _scheduler_step(
    name: str, candidates: QuerySet[RunnerJob], settle: Callable[[Run, int], None]
) -> bool:
    """Handle one candidate job: lock its run, then let `settle` re-check and change it under
    the lock. False when there was no candidate it could take.

    A candidate `settle` raises on is rolled back alone and set aside (`job_hold`); the
    database's own passing trouble is not the row's fault and is raised.
    """
    with transaction.atomic():
        picked = _pick(candidates)
        if picked is None:
            return False
        run, job_id = picked
        try:
            with transaction.atomic():
                settle(run, job_id)
        except Exception as exc:
            if transient_cause(exc) is not None:
                raise
            until = queue.job_hold(job_id=job_id, error=f"{name}: {type(exc).__name__}: {exc}")
            metrics.SWEEP_FAILURES.labels(step=name).inc()
            log.exception("%s raised on job %s: set aside until %s", name, job_id, until)
    return True


def _settle_expired_lease(run: Run, job_id: int) -> None:
    ended = queue.lease_expire(job_id=job_id)
    if ended is None:
        return
    for job in ended.requeued:
        holder = job.leased_by.label if job.leased_by else "its runner"
        if job.attempts < job.max_attempts:
            attempt = f"attempt {job.attempts} of {job.max_attempts}"
            then = f"requeued ({attempt}); {holder} may resume it"
        else:
            window = settings.EVERDICT_RESUME_WINDOW_S
            then = f"its attempts are spent: {holder} alone may resume it within {window}s"
        event(run, f"Case {job.case_key}: lease expired (no heartbeat) — {then}.", "warning")


def _settle_lapsed_lease(run: Run, job_id: int) -> None:
    ended = queue.lapsed_lease_end(job_id=job_id)
    if ended is None:
        return
    for job in ended.jobs:
        record_error(run, job, job.reason, runner=job.leased_by)
    run_advance(run)


def _no_runner_message(run: Run, job: RunnerJob) -> str:
    waited = settings.EVERDICT_QUEUE_IDLE_TIMEOUT_S
    needed = list(job.required_capabilities or [])
    features = list(job.needs_features or [])
    if run.runner is not None:
        why = queue.absence(run.runner, needed, features=features)
        who = f"runner {run.runner.label} (#{run.runner.pk}) was {why}"
    else:
        owner = run.submitted_by.get_username()
        runners = list(Runner.objects.owned_by(run.submitted_by).active())
        listed = "; ".join(
            f"{r.label} (#{r.pk}) {queue.absence(r, needed, features=features)}" for r in runners
        )
        who = f"none of {owner}'s runners that could take it was active: {listed or 'none paired'}"
    return f"no_runner: no runner took this case and none was active for {waited}s — {who}"


def _settle_idle_queue(run: Run, job_id: int) -> None:
    job = RunnerJob.objects.get(pk=job_id)
    message = _no_runner_message(run, job)
    ended = queue.jobs_idle_expire(job_id=job_id)
    if ended is None:
        return
    event(run, message, EventLevel.ERROR)
    for ended_job in ended.jobs:
        record_error(run, ended_job, message, runner=None)
    run_advance(run)


def _settle_revoked_runner(run: Run, job_id: int) -> None:
    ended = queue.jobs_of_revoked_runner_end(job_id=job_id)
    if ended is None:
        return
    event(run, "Runner revoked: its open cases end as errors.", EventLevel.ERROR)
    for job in ended.jobs:
        record_error(run, job, "runner revoked", runner=None)
    run_advance(run)


def scheduler_expire_one_lease() -> bool:
    """Expire one silent lease: the job back in the queue, resumable by its holder."""
    return _scheduler_step("expire_lease", queue.leases_expired(), _settle_expired_lease)


def scheduler_end_one_lapsed_lease() -> bool:
    """Fail one job whose last attempt lapsed past the resume window (an `error`)."""
    return _scheduler_step("end_lapsed_lease", queue.leases_lapsed_for_good(), _settle_lapsed_lease)


def scheduler_expire_one_idle_run() -> bool:
    """Fail one run's queue that waited past the idle timeout with no runner active that could
    take it (`no_runner`, naming the runner and why)."""
    return _scheduler_step("expire_idle_run", queue.jobs_idle(), _settle_idle_queue)


def scheduler_settle_one_revoked() -> bool:
    """Settle the open jobs of one run pinned to a revoked runner."""
    return _scheduler_step(
        "settle_revoked", queue.jobs_of_revoked_runners(), _settle_revoked_runner
    )


# Runs whose completion raised, set aside in this process until then (monotonic clock).
_held_runs: dict[int, float] = {}


def scheduler_complete_one_run() -> bool:
    """Safety net: complete a run whose jobs have all ended but that is still open."""
    now = time.monotonic()
    held = [pk for pk, until in _held_runs.items() if until > now]
    with transaction.atomic():
        finished = (
            Run.objects.filter(status__in=(RunStatus.QUEUED, RunStatus.RUNNING))
            .exclude(Q(jobs__status__in=OPEN_JOB_STATUSES) | Q(pk__in=held))
            .order_by("pk")
        )
        if connection.vendor == "postgresql":
            finished = finished.select_for_update(skip_locked=True, of=("self",))
        run = finished.first()
        if run is None:
            return False
        try:
            with transaction.atomic():
                # Re-checked under the lock: a job may have been admitted meanwhile.
                if not run.jobs.filter(status__in=OPEN_JOB_STATUSES).exists():
                    run_complete(run, timezone.now())
        except Exception as exc:
            if transient_cause(exc) is not None:
                raise
            _held_runs[run.pk] = now + 60
            metrics.SWEEP_FAILURES.labels(step="complete_run").inc()
            log.exception("completing run %s raised: set aside for a minute", run.pk)
    return True


def operator_job_requeue(*, job_id: int, operator: User) -> bool:
    """Requeue an open job now (Django admin); its current runner is fenced off."""
    with transaction.atomic():
        run = locked_run_of(job_id)
        job = queue.job_requeue(job_id=job_id, reason=f"requeued by {operator.get_username()}")
        if job is None or run is None:
            return False
        event(run, f"Case {job.case_key}: requeued by operator {operator.get_username()}.")
    return True


def operator_job_fail(*, job_id: int, operator: User) -> bool:
    """Fail an open job now (Django admin), recording an `error` result for its case."""
    reason = f"failed by operator {operator.get_username()}"
    with transaction.atomic():
        run = locked_run_of(job_id)
        job = queue.job_abort(job_id=job_id, reason=reason)
        if job is None or run is None:
            return False
        record_error(run, job, reason, runner=None)
        run_advance(run)
    return True


SCHEDULER_STEPS = (
    scheduler_expire_one_lease,
    scheduler_end_one_lapsed_lease,
    scheduler_settle_one_revoked,
    scheduler_expire_one_idle_run,
    scheduler_complete_one_run,
)
