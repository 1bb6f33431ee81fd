"""The scheduler's steps and the operators' actions: expire silent leases, settle the jobs of
revoked runners, end idle queues, complete finished runs; requeue or fail one job."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from runners import queue
from runners.models import JobStatus, Runner, RunnerJob
from scorecards.models import EventLevel, Run, RunStatus
from scorecards.services.events import event
from scorecards.services.results import locked_run_of, record_error, run_advance, run_complete


def _scheduler_step(candidates: QuerySet[RunnerJob], settle: Callable[[Run, int], None]) -> bool:
    """Handle one candidate job: lock its run first (the lock order everywhere), then let
    `settle` re-check and change it under the lock. False when there was no candidate."""
    with transaction.atomic():
        job_id = candidates.values_list("pk", flat=True).first()
        if job_id is None:
            return False
        run = locked_run_of(job_id)
        if run is not None:
            settle(run, job_id)
    return True


def _settle_expired_lease(run: Run, job_id: int) -> None:
    ended = queue.lease_expire(job_id=job_id)
    if ended is None:
        return
    for job in ended.requeued:
        event(
            run,
            f"Case {job.case_key}: lease expired (no heartbeat) — requeued "
            f"(attempt {job.attempts} of {job.max_attempts}).",
            EventLevel.WARNING,
        )
    for job in ended.jobs:
        record_error(run, job, job.reason, runner=job.leased_by)
    if ended.jobs:
        run_advance(run)


def _no_runner_message(run: Run) -> str:
    waited = settings.EVERDICT_QUEUE_IDLE_TIMEOUT_S
    if run.runner is not None:
        state = "offline" if not run.runner.is_online else "online but did not take it"
        who = f"runner {run.runner.label} (#{run.runner.pk}) was {state}"
    else:
        runners = list(Runner.objects.owned_by(run.submitted_by).active())
        listed = ", ".join(f"{r.label} ({'online' if r.is_online else 'offline'})" for r in runners)
        who = f"none of {run.submitted_by.get_username()}'s runners took it: {listed or 'none'}"
    return f"no_runner: no runner leased this case within {waited}s — {who}"


def _settle_idle_queue(run: Run, job_id: int) -> None:
    ended = queue.jobs_idle_expire(job_id=job_id)
    if ended is None:
        return
    message = _no_runner_message(run)
    event(run, message, EventLevel.ERROR)
    for job in ended.jobs:
        record_error(run, job, message, runner=None)
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
    """Expire one silent lease (requeue, or an `error` when out of attempts)."""
    return _scheduler_step(queue.leases_expired(), _settle_expired_lease)


def scheduler_expire_one_idle_run() -> bool:
    """Fail one run's queue that no runner took within the idle timeout (`no_runner`)."""
    return _scheduler_step(queue.jobs_idle(), _settle_idle_queue)


def scheduler_settle_one_revoked() -> bool:
    """Settle the open jobs of one run pinned to a revoked runner."""
    return _scheduler_step(queue.jobs_of_revoked_runners(), _settle_revoked_runner)


def scheduler_complete_one_run() -> bool:
    """Safety net: complete a run whose jobs have all ended but that is still open."""
    open_jobs = Q(jobs__status__in=(JobStatus.PENDING, JobStatus.QUEUED, JobStatus.LEASED))
    run_id = (
        Run.objects.filter(status__in=(RunStatus.QUEUED, RunStatus.RUNNING))
        .exclude(open_jobs)
        .values_list("pk", flat=True)
        .first()
    )
    if run_id is None:
        return False
    with transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).get(pk=run_id)
        if (
            run.is_terminal
            or run.jobs.filter(
                status__in=(JobStatus.PENDING, JobStatus.QUEUED, JobStatus.LEASED)
            ).exists()
        ):
            return True
        run_complete(run, timezone.now())
    return True


def operator_job_requeue(*, job_id: int, operator: Any) -> bool:
    """Requeue an open job now (Django admin); its current runner is fenced off."""
    with transaction.atomic():
        run = locked_run_of(job_id)
        job = queue.job_requeue(job_id=job_id, reason=f"requeued by {operator.get_username()}")
        if job is None or run is None:
            return False
        event(run, f"Case {job.case_key}: requeued by operator {operator.get_username()}.")
    return True


def operator_job_fail(*, job_id: int, operator: Any) -> bool:
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
    scheduler_settle_one_revoked,
    scheduler_expire_one_idle_run,
    scheduler_complete_one_run,
)
