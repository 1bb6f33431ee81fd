"""Leases given back without spending an attempt: one that never reached its caller, and one
its runner hands back (a plan limit hit, a member stopping the runner), optionally pausing
the runner until its plan allows it to work again."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from runners import metrics, wakeup
from runners.models import AttemptStatus, JobStatus, Runner, RunnerJob
from runners.queue.fence import RESUMED, Settlement, holds, refused, take_back
from runners.queue.rows import current_attempt, locked_job, write

# The longest a runner may pause itself: beyond, it asks again when the pause ends.
MAX_PAUSE = timedelta(days=7)
MAX_PAUSE_REASON_CHARS = 200


def _give_back(job: RunnerJob, now: datetime, why: str) -> None:
    """The job back in the queue, claimable by anyone at once; its attempt superseded and not
    counted against it (the row is locked)."""
    current_attempt(job).update(status=AttemptStatus.SUPERSEDED, ended_at=now, reason=why[:500])
    write(
        job,
        status=JobStatus.QUEUED,
        leased_by=None,
        leased_until=None,
        queued_at=now,
        attempts=max(0, job.attempts - 1),
    )
    wakeup.notify_owners([job.owner_id])


def job_release(*, runner: Runner, job_id: int, lease_epoch: int) -> bool:
    """Give back a lease that never reached its caller: the job is claimable again at once."""
    now = timezone.now()
    with transaction.atomic():
        job = locked_job(job_id)
        if job is None or not holds(job, runner, lease_epoch):
            return False
        _give_back(job, now, "lease not delivered")
    return True


def job_hand_back(
    *,
    runner: Runner,
    job_id: int,
    lease_epoch: int,
    reason: str,
    paused_until: datetime | None = None,
) -> Settlement:
    """Return a fenced job to the queue without spending an attempt (call in the caller's
    transaction). With `paused_until` (at most a week ahead) the runner leases nothing until
    then; the pause and its reason are kept on the runner row. A holder whose lease lapsed
    takes it back first."""
    now = timezone.now()
    job = locked_job(job_id)
    resumed = job is not None and not holds(job, runner, lease_epoch)
    if job is None or not take_back(job, runner, lease_epoch, now):
        ack = refused("release_job", job, runner, lease_epoch)
        return Settlement(accepted=False, reason=ack.reason)
    _give_back(job, now, f"released by its runner: {reason}")
    if paused_until is not None and paused_until > now:
        runner_pause(runner=runner, until=min(paused_until, now + MAX_PAUSE), reason=reason)
    metrics.RELEASES.inc()
    return Settlement(
        accepted=True, reason=RESUMED if resumed else "", job=job, requeued=True, resumed=resumed
    )


def runner_pause(*, runner: Runner, until: datetime, reason: str) -> None:
    """Pause the runner until then (a plan limit): it leases nothing meanwhile."""
    reason = reason[:MAX_PAUSE_REASON_CHARS]
    Runner.objects.filter(pk=runner.pk).update(paused_until=until, pause_reason=reason)
    runner.paused_until, runner.pause_reason = until, reason
