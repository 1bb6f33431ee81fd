"""What a runner reports of a running case besides its log: its trace and its screen.

Both are fenced like a log line: only the lease's current holder at its epoch is heard (a
holder whose lease lapsed takes it back first: its case is still running). The trace of an
attempt is also heard from its own runner after that attempt settled its job, within the
resume window — a runner restarted after a crash sends the trace it spooled, and its result
may have landed first; it is the trace of that attempt, which no successor shares.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from runnercli.protocol import TraceAck, TraceEvent
from runners import metrics
from runners.models import JobStatus, Runner, RunnerJob
from runners.queue.fence import RESUMED, holds, refusal, take_back
from runners.queue.rows import locked_job, resume_window
from scorecards.traces.models import CaseTrace
from scorecards.traces.steps import advance
from scorecards.traces.store import TraceWriter

SETTLED = (JobStatus.SUCCEEDED, JobStatus.FAILED)


def settled_by(job: RunnerJob, runner: Runner, lease_epoch: int, now: datetime) -> bool:
    """Whether this runner's attempt at this epoch settled the job, within the resume window
    (nobody leased it since: the epoch is still the job's)."""
    return (
        job.status in SETTLED
        and job.leased_by_id == runner.pk
        and job.lease_epoch == lease_epoch
        and job.finished_at is not None
        and job.finished_at >= now - resume_window()
    )


def fence_open(
    job: RunnerJob | None, runner: Runner, lease_epoch: int, now: datetime, *, settled: bool
) -> str | None:
    """The reason to answer (`""`, or `resumed`) when the call is honoured, else None; the job
    row is locked by the caller. `settled` also honours the attempt that settled the job."""
    if job is None:
        return None
    if holds(job, runner, lease_epoch):
        return ""
    if settled and settled_by(job, runner, lease_epoch, now):
        return ""
    if take_back(job, runner, lease_epoch, now):
        return RESUMED
    return None


def trace_of(job: RunnerJob) -> CaseTrace:
    """The trace row of the job's current attempt (the job row is locked by the caller)."""
    assert job.current_attempt_id is not None
    trace, _ = CaseTrace.objects.get_or_create(
        attempt_id=job.current_attempt_id, defaults={"job_id": job.pk, "run_id": job.run_id}
    )
    return trace


def trace_report(
    *, runner: Runner, job_id: int, lease_epoch: int, events: Sequence[TraceEvent]
) -> TraceAck:
    """Store the events the attempt's trace does not hold yet, within its bounds; answer the
    highest seq it now holds with every one before it, from which the runner sends on."""
    now = timezone.now()
    with transaction.atomic():
        job = locked_job(job_id)
        reason = fence_open(job, runner, lease_epoch, now, settled=True)
        if job is None or reason is None:
            refused = refusal(job, runner, lease_epoch)
            metrics.fenced("report_case_trace", refused)
            return TraceAck(accepted=False, reason=refused)
        trace = trace_of(job)
        fresh = contiguous(trace.last_seq, events)
        if fresh:
            TraceWriter(
                trace,
                max_events=settings.EVERDICT_MAX_TRACE_EVENTS,
                max_bytes=settings.EVERDICT_MAX_TRACE_BYTES,
            ).write(fresh)
            trace.state = advance(trace.state, fresh)
            trace.updated_at = now
            trace.save()
    return TraceAck(accepted=True, reason=reason, last_seq=trace.last_seq)


def contiguous(last_seq: int, events: Sequence[TraceEvent]) -> list[TraceEvent]:
    """The events that follow `last_seq` without a gap (those held already are left out; a
    gap stops them: the runner sends again from the seq answered)."""
    by_seq = {event.seq: event for event in events}
    fresh: list[TraceEvent] = []
    while (event := by_seq.get(last_seq + 1 + len(fresh))) is not None:
        fresh.append(event)
    return fresh
