"""Sweeps and operator actions: expire silent leases, end lapsed ones past the resume window,
idle queues and the jobs of revoked runners, cancel a run's jobs, requeue or abort one job,
hand back a revoked runner's jobs, and set aside a row a sweep could not handle.

Each re-checks its condition under the row lock and returns what it ended, for the caller
(scorecards) to record.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import F, QuerySet
from django.utils import timezone

from runners.models import AttemptStatus, JobKind, JobStatus, Runner, RunnerJob
from runners.queue.activity import jobs_idle
from runners.queue.rows import end, end_attempts, lapse, locked_job, requeue, write_all
from runners.queue.selectors import (
    OPEN_JOB_STATUSES,
    jobs_of_revoked_runners,
    leases_lapsed_for_good,
)

HOLD_BASE = timedelta(seconds=30)
HOLD_MAX = timedelta(hours=1)


@dataclass
class Ended:
    """Jobs a queue primitive ended, for the caller to record results for."""

    jobs: list[RunnerJob] = field(default_factory=list)
    requeued: list[RunnerJob] = field(default_factory=list)


def lease_expire(*, job_id: int) -> Ended | None:
    """Expire this job's silent lease: its attempt ends `expired` and the job goes back to the
    queue at the same epoch, its holder kept — it may resume it (resume, not rerun). A job
    out of attempts is claimable by nobody else: it stays resumable by its holder alone for
    the resume window (`lapsed_lease_end` fails it after).

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
    lapse(job, now)
    return Ended(requeued=[job])


def lapsed_lease_end(*, job_id: int) -> Ended | None:
    """Fail this job whose last attempt's lease lapsed longer than the resume window ago
    (`lease expired after N attempts`). None when it no longer is such a job."""
    job = locked_job(job_id)
    if job is None or not leases_lapsed_for_good().filter(pk=job_id).exists():
        return None
    end([job], JobStatus.FAILED, f"lease expired after {job.attempts} attempts", timezone.now())
    return Ended(jobs=[job])


def job_hold(*, job_id: int, error: str) -> datetime:
    """Set aside a job a sweep raised on: count it, keep why, and leave it alone for a while,
    longer each time (30 s doubling, at most an hour); return until when."""
    job = RunnerJob.objects.filter(pk=job_id).values("sweep_failures").first()
    failures = (job["sweep_failures"] if job else 0) + 1
    until = timezone.now() + min(HOLD_BASE * 2 ** min(failures - 1, 10), HOLD_MAX)
    RunnerJob.objects.filter(pk=job_id).update(
        sweep_failures=F("sweep_failures") + 1, sweep_error=error[:500], sweep_held_until=until
    )
    return until


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


def jobs_cancel(
    *, run_id: int, not_started: bool = False, reason: str = "canceled"
) -> list[RunnerJob]:
    """Cancel the run's open jobs. A leased job's holder learns it on its next heartbeat.
    With `not_started`, only its cases no runner holds (pending or queued; judges and leased
    cases go on)."""
    now = timezone.now()
    chosen = RunnerJob.objects.select_for_update(of=("self",)).filter(
        run_id=run_id, status__in=OPEN_JOB_STATUSES
    )
    if not_started:
        chosen = chosen.filter(
            kind=JobKind.CASE, status__in=(JobStatus.PENDING, JobStatus.QUEUED)
        ).order_by("pk")
    jobs = list(chosen)
    # Any attempt still executing ends with its job, whatever state the job was in.
    end_attempts([j.current_attempt_id for j in jobs], AttemptStatus.CANCELED, reason, now)
    # leased_by and the epoch stay, so the holder's heartbeat is answered `cancel: true`.
    write_all(jobs, status=JobStatus.CANCELED, finished_at=now, leased_until=None, reason=reason)
    return jobs


def job_requeue(*, job_id: int, reason: str) -> RunnerJob | None:
    """Put an open job back in the queue now (an operator's action); its holder — current, or
    whose lease lapsed — is fenced off, its attempt superseded if still executing. None if
    closed."""
    job = locked_job(job_id)
    if job is None or job.status not in (JobStatus.LEASED, JobStatus.QUEUED):
        return None
    now = timezone.now()
    end_attempts([job.current_attempt_id], AttemptStatus.SUPERSEDED, reason, now)
    if job.leased_by_id is not None:
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
    end_attempts([job.current_attempt_id], AttemptStatus.FAILED, reason, now)
    end([job], JobStatus.FAILED, reason, now)
    return job


def jobs_release_from(*, runner: Runner) -> list[RunnerJob]:
    """Requeue the `self:any` jobs a revoked runner holds or may resume: their executing
    attempts end `superseded`, and the owner's other runners may claim them. Jobs pinned to
    it are not touched (the scheduler ends them)."""
    now = timezone.now()
    jobs = list(
        RunnerJob.objects.select_for_update(of=("self",)).filter(
            status__in=(JobStatus.LEASED, JobStatus.QUEUED),
            leased_by=runner,
            runner__isnull=True,
        )
    )
    end_attempts(
        [j.current_attempt_id for j in jobs], AttemptStatus.SUPERSEDED, "runner revoked", now
    )
    requeue(jobs, now, "runner_revoked")
    return jobs
