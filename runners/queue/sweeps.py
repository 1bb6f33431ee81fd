"""Sweeps and operator actions: expire silent leases, end idle queues and the jobs of revoked
runners, cancel a run's jobs, requeue or abort one job, hand back a revoked runner's jobs.

Each re-checks its condition under the row lock and returns what it ended, for the caller
(scorecards) to record.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import F, QuerySet
from django.utils import timezone

from runners.models import AttemptStatus, JobStatus, Runner, RunnerJob
from runners.queue.rows import end, end_attempts, locked_job, requeue, write_all
from runners.queue.selectors import (
    OPEN_JOB_STATUSES,
    jobs_idle,
    jobs_of_revoked_runners,
)


@dataclass
class Ended:
    """Jobs a queue primitive ended, for the caller to record results for."""

    jobs: list[RunnerJob] = field(default_factory=list)
    requeued: list[RunnerJob] = field(default_factory=list)


def lease_expire(*, job_id: int) -> Ended | None:
    """Expire this job's silent lease: requeue it, or fail it when out of attempts.

    None when the lease is no longer expired (a heartbeat or another scheduler got there
    first): the condition is re-checked under the row lock.
    """
    now = timezone.now()
    job = locked_job(job_id)
    if job is None or job.status != JobStatus.LEASED or not job.leased_until:
        return None
    if job.leased_until >= now:
        return None
    end_attempts(
        [job.current_attempt_id], AttemptStatus.EXPIRED, "no heartbeat within the lease", now
    )
    if job.attempts < job.max_attempts:
        requeue([job], now, "lease_expired")
        return Ended(requeued=[job])
    end([job], JobStatus.FAILED, f"lease expired after {job.attempts} attempts", now)
    return Ended(jobs=[job])


def _end_open(candidates: QuerySet[RunnerJob], reason: str) -> list[RunnerJob]:
    """Fail these open jobs (locked, in admission order); attempts still executing fail too."""
    now = timezone.now()
    jobs = list(candidates.select_for_update(of=("self",)).order_by("seq"))
    end_attempts([j.current_attempt_id for j in jobs], AttemptStatus.FAILED, reason, now)
    end(jobs, JobStatus.FAILED, reason, now)
    return jobs


def jobs_idle_expire(*, job_id: int) -> Ended | None:
    """Fail this idle job (`no_runner`) and its run's other queued and pending jobs."""
    job = locked_job(job_id)
    if job is None or not jobs_idle().filter(pk=job_id).exists():
        return None
    waiting = RunnerJob.objects.filter(
        run_id=job.run_id, status__in=(JobStatus.QUEUED, JobStatus.PENDING)
    )
    return Ended(jobs=_end_open(waiting, "no_runner"))


def jobs_of_revoked_runner_end(*, job_id: int) -> Ended | None:
    """End the open jobs of this job's run pinned to its revoked runner ("runner revoked")."""
    job = locked_job(job_id)
    if job is None or not jobs_of_revoked_runners().filter(pk=job_id).exists():
        return None
    pinned = jobs_of_revoked_runners().filter(run_id=job.run_id, runner_id=job.runner_id or 0)
    return Ended(jobs=_end_open(pinned, "runner revoked"))


def jobs_cancel(*, run_id: int) -> list[RunnerJob]:
    """Cancel the run's open jobs. A leased job's holder learns it on its next heartbeat."""
    now = timezone.now()
    jobs = list(
        RunnerJob.objects.select_for_update(of=("self",)).filter(
            run_id=run_id, status__in=OPEN_JOB_STATUSES
        )
    )
    executing = [j.current_attempt_id for j in jobs if j.status == JobStatus.LEASED]
    end_attempts(executing, AttemptStatus.CANCELED, "canceled", now)
    # leased_by and the epoch stay, so the holder's heartbeat is answered `cancel: true`.
    write_all(
        jobs, status=JobStatus.CANCELED, finished_at=now, leased_until=None, reason="canceled"
    )
    return jobs


def job_requeue(*, job_id: int, reason: str) -> RunnerJob | None:
    """Put an open job back in the queue now (an operator's action); its attempt, if one is
    executing, is superseded so its runner's later calls are fenced off. None if closed."""
    job = locked_job(job_id)
    if job is None or job.status not in (JobStatus.LEASED, JobStatus.QUEUED):
        return None
    now = timezone.now()
    if job.status == JobStatus.LEASED:
        end_attempts([job.current_attempt_id], AttemptStatus.SUPERSEDED, reason, now)
        # Bumping the epoch fences the old holder even before anyone claims the job.
        RunnerJob.objects.filter(pk=job.pk).update(lease_epoch=F("lease_epoch") + 1)
        job.lease_epoch += 1
    requeue([job], now, "operator")
    return job


def job_abort(*, job_id: int, reason: str) -> RunnerJob | None:
    """End an open job as failed (an operator's action). None if it was already closed."""
    job = locked_job(job_id)
    if job is None or job.is_terminal:
        return None
    now = timezone.now()
    if job.status == JobStatus.LEASED:
        end_attempts([job.current_attempt_id], AttemptStatus.FAILED, reason, now)
    end([job], JobStatus.FAILED, reason, now)
    return job


def jobs_release_from(*, runner: Runner) -> list[RunnerJob]:
    """Requeue the `self:any` jobs a runner holds (it was revoked); its attempts are left to
    be superseded by the next claim. Jobs pinned to it are not touched."""
    jobs = list(
        RunnerJob.objects.select_for_update(of=("self",)).filter(
            status=JobStatus.LEASED, leased_by=runner, runner__isnull=True
        )
    )
    requeue(jobs, timezone.now(), "runner_revoked")
    return jobs
