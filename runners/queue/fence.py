"""Fenced calls: everything a runner does after a lease carries `(job_id, lease_epoch)` and is
honoured only for the job's current holder at its current epoch.

A holder whose lease lapsed (it slept, or the network or the database was away longer than
the lease) is still the holder while nobody else leased the job: any of its fenced calls
takes the lease back first (`take_back`), in the same transaction, and is then honoured.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from core import prebuilt
from runnercli.protocol import Ack, HeartbeatAck
from runners import metrics
from runners.models import AttemptStatus, JobStatus, Runner, RunnerJob
from runners.presence import runner_touch
from runners.queue.rows import current_attempt, end, lease_ttl, locked_job, requeue, resumable
from runners.queue.rows import resume as resume_lease

RESUMED = "resumed"


@dataclass
class Settlement:
    """What a fenced settling call did. `job` is set whenever the job exists for the caller."""

    accepted: bool
    reason: str = ""
    job: RunnerJob | None = None
    duplicate: bool = False
    requeued: bool = False
    ended: bool = False
    resumed: bool = False

    def ack(self) -> Ack:
        return Ack(accepted=self.accepted, reason=self.reason)


def holds(job: RunnerJob, runner: Runner, lease_epoch: int) -> bool:
    return (
        job.status == JobStatus.LEASED
        and job.leased_by_id == runner.pk
        and job.lease_epoch == lease_epoch
    )


def holds_sql(job: str, alias: str) -> str:
    """`holds` as SQL, for a statement fenced in its WHERE clause: the job row aliased `job`
    is leased by the runner at the epoch (its parameters: `holds_params`). What such a
    statement does not find, the full fence then refuses or takes back."""

    def col(name: str) -> str:
        return f"{job}.{prebuilt.column(RunnerJob, name, alias)}"

    return f"{col('status')} = %s AND {col('leased_by')} = %s AND {col('lease_epoch')} = %s"


def holds_params(runner_id: int, lease_epoch: int) -> list[Any]:
    return [JobStatus.LEASED, runner_id, lease_epoch]


def take_back(job: RunnerJob, runner: Runner, lease_epoch: int, now: datetime) -> bool:
    """Whether the runner holds the job's lease now, resuming it if it had lapsed (the job
    row is locked by the caller's transaction)."""
    if holds(job, runner, lease_epoch):
        return True
    if not resumable(job, runner.pk, lease_epoch, now):
        return False
    resume_lease(job, now)
    return True


def refusal(job: RunnerJob | None, runner: Runner, lease_epoch: int) -> str:
    """Say why a fenced call is refused, without revealing anyone else's jobs."""
    if job is None or job.owner_id != runner.owner_id:
        return "unknown job"
    if job.leased_by_id != runner.pk or job.lease_epoch != lease_epoch:
        return f"stale lease: epoch {lease_epoch} is no longer this runner's lease of the job"
    if job.status == JobStatus.CANCELED:
        return "canceled"
    if job.status == JobStatus.QUEUED:
        return "lease expired: its attempts are spent and the resume window has passed"
    return f"job is {job.status}"


def job_heartbeat(
    *, runner: Runner, job_id: int, lease_epoch: int, status: str = ""
) -> HeartbeatAck:
    """Extend the lease for its current holder only — taking it back if it had lapsed; tell
    a canceled job's holder to stop."""
    runner_touch(runner=runner, status=status)
    now = timezone.now()
    extended = RunnerJob.objects.filter(
        pk=job_id, status=JobStatus.LEASED, leased_by=runner, lease_epoch=lease_epoch
    ).update(leased_until=now + lease_ttl())
    if extended == 1:
        return HeartbeatAck(accepted=True)
    with transaction.atomic():
        job = locked_job(job_id)
        if job is not None and holds(job, runner, lease_epoch):
            # Another call of this holder (its log, its result) took the lapsed lease back
            # between the update above and this lock: the lease is its own again.
            RunnerJob.objects.filter(pk=job.pk).update(leased_until=now + lease_ttl())
            return HeartbeatAck(accepted=True)
        if job is not None and resumable(job, runner.pk, lease_epoch, now):
            resume_lease(job, now)
            return HeartbeatAck(accepted=True, resumed=True, reason=RESUMED)
    reason = refusal(job, runner, lease_epoch)
    if not reason.startswith("job is"):
        # The holder's own heartbeat crossing its result is not a fenced-off call.
        metrics.fenced("heartbeat_job", reason)
    return HeartbeatAck(accepted=False, cancel=reason == "canceled", reason=reason)


def job_fail(
    *, runner: Runner, job_id: int, lease_epoch: int, message: str, retryable: bool = False
) -> Settlement:
    """End the fenced attempt as failed: requeue it when retryable and attempts remain.

    A holder whose lease lapsed takes it back first: the failure it reports is that of the
    attempt it ran.
    """
    now = timezone.now()
    job = locked_job(job_id)
    resumed = job is not None and not holds(job, runner, lease_epoch)
    if job is None or not take_back(job, runner, lease_epoch, now):
        reason = refusal(job, runner, lease_epoch)
        metrics.fenced("fail_job", reason)
        return Settlement(accepted=False, reason=reason)
    reason = RESUMED if resumed else ""
    current_attempt(job).update(status=AttemptStatus.FAILED, ended_at=now, reason=message[:500])
    if retryable and job.attempts < job.max_attempts:
        requeue([job], now, "retryable_failure")
        return Settlement(accepted=True, reason=reason, job=job, requeued=True, resumed=resumed)
    end([job], JobStatus.FAILED, message, now)
    return Settlement(accepted=True, reason=reason, job=job, ended=True, resumed=resumed)


def refused(call: str, job: RunnerJob | None, runner: Runner, lease_epoch: int) -> Ack:
    reason = refusal(job, runner, lease_epoch)
    metrics.fenced(call, reason)
    return Ack(accepted=False, reason=reason)
