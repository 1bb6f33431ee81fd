"""What a runner says about a lease it holds besides its result: a heartbeat (which may take
back a lapsed lease) and handing a job back without spending an attempt (a plan limit)."""

from __future__ import annotations

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from runnercli.protocol import Ack, HeartbeatAck
from runners import queue
from runners.models import Runner, RunnerJob
from scorecards.models import EventLevel, Run
from scorecards.services.events import event
from scorecards.services.results import locked_run_of, resumed_event


def lease_heartbeat(
    *, runner: Runner, job_id: int, lease_epoch: int, status: str = ""
) -> HeartbeatAck:
    """Extend the runner's lease of the job (taking it back if it had lapsed, which the run's
    events say); `cancel: true` means stop the case now."""
    ack = queue.job_heartbeat(runner=runner, job_id=job_id, lease_epoch=lease_epoch, status=status)
    if ack.resumed:
        job = RunnerJob.objects.filter(pk=job_id).first()
        run = Run.objects.filter(pk=job.run_id).first() if job is not None else None
        if job is not None and run is not None:
            resumed_event(run, job, runner)
    return ack


def _clock(moment: datetime) -> str:
    return timezone.localtime(moment).strftime("%H:%M")


def lease_hand_back(
    *,
    runner: Runner,
    job_id: int,
    lease_epoch: int,
    reason: str,
    paused_until: datetime | None = None,
) -> Ack:
    """Hand a leased job back to the queue without spending an attempt; with `paused_until`
    the runner leases nothing until then (a plan limit). The run's events say why it waits."""
    with transaction.atomic():
        run = locked_run_of(job_id)
        settled = queue.job_hand_back(
            runner=runner,
            job_id=job_id,
            lease_epoch=lease_epoch,
            reason=reason,
            paused_until=paused_until,
        )
        if not settled.accepted or run is None or settled.job is None:
            return settled.ack()
        paused = runner.paused_until
        if paused_until is None or paused is None or paused <= timezone.now():
            paused = None
        waits = f" — it leases nothing until {_clock(paused)}" if paused else ""
        event(
            run,
            f"Case {settled.job.case_key}: runner {runner.label} handed it back ({reason}), "
            f"no attempt spent{waits}.",
            EventLevel.WARNING if paused else EventLevel.INFO,
        )
    return settled.ack()
