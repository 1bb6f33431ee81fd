"""Fenced calls: everything a runner does after a lease carries `(job_id, lease_epoch)` and is
honoured only for the job's current holder at its current epoch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction
from django.utils import timezone

from runnercli.protocol import Ack, HeartbeatAck
from runners import metrics, wakeup
from runners.models import AttemptStatus, JobAttempt, JobLogLine, JobStatus, Runner, RunnerJob
from runners.presence import runner_touch
from runners.queue.rows import current_attempt, end, lease_ttl, locked_job, requeue, write


@dataclass
class Settlement:
    """What a fenced settling call did. `job` is set whenever the job exists for the caller."""

    accepted: bool
    reason: str = ""
    job: RunnerJob | None = None
    duplicate: bool = False
    requeued: bool = False
    ended: bool = False

    def ack(self) -> Ack:
        return Ack(accepted=self.accepted, reason=self.reason)


@dataclass(frozen=True)
class Outcome:
    """A result a runner reports for one fenced attempt, as the queue records it."""

    job_id: int
    lease_epoch: int
    succeeded: bool
    result_digest: str
    reason: str = ""


def holds(job: RunnerJob, runner: Runner, lease_epoch: int) -> bool:
    return (
        job.status == JobStatus.LEASED
        and job.leased_by_id == runner.pk
        and job.lease_epoch == lease_epoch
    )


def refusal(job: RunnerJob | None, runner: Runner, lease_epoch: int) -> str:
    """Say why a fenced call is refused, without revealing anyone else's jobs."""
    if job is None or job.owner_id != runner.owner_id:
        return "unknown job"
    if job.leased_by_id != runner.pk or job.lease_epoch != lease_epoch:
        return f"stale lease: epoch {lease_epoch} is no longer this runner's lease of the job"
    if job.status == JobStatus.CANCELED:
        return "canceled"
    return f"job is {job.status}"


def job_heartbeat(
    *, runner: Runner, job_id: int, lease_epoch: int, status: str = ""
) -> HeartbeatAck:
    """Extend the lease for its current holder only; tell a canceled job's holder to stop."""
    runner_touch(runner=runner, status=status)
    until = timezone.now() + lease_ttl()
    extended = RunnerJob.objects.filter(
        pk=job_id, status=JobStatus.LEASED, leased_by=runner, lease_epoch=lease_epoch
    ).update(leased_until=until)
    if extended == 1:
        return HeartbeatAck(accepted=True)
    job = RunnerJob.objects.filter(pk=job_id).first()
    reason = refusal(job, runner, lease_epoch)
    if not reason.startswith("job is"):
        # The holder's own heartbeat crossing its result is not a fenced-off call.
        metrics.fenced("heartbeat_job", reason)
    return HeartbeatAck(accepted=False, cancel=reason == "canceled", reason=reason)


def job_report_log(*, runner: Runner, job_id: int, lease_epoch: int, lines: Sequence[str]) -> Ack:
    """Append log lines to the job's run, read from the lease, never from the caller."""
    job = (
        RunnerJob.objects.filter(
            pk=job_id, status=JobStatus.LEASED, leased_by=runner, lease_epoch=lease_epoch
        )
        .only("pk", "run_id")
        .first()
    )
    if job is None:
        found = RunnerJob.objects.filter(pk=job_id).first()
        reason = refusal(found, runner, lease_epoch)
        metrics.fenced("report_case_log", reason)
        return Ack(accepted=False, reason=reason)
    now = timezone.now()
    JobLogLine.objects.bulk_create(
        [
            JobLogLine(
                job_id=job.pk,
                run_id=job.run_id,
                epoch=lease_epoch,
                at=now,
                line=line.replace("\x00", "\ufffd"),
            )
            for line in lines
        ]
    )
    return Ack(accepted=True)


def jobs_settle(*, runner: Runner, outcomes: Sequence[Outcome]) -> list[Settlement]:
    """End fenced attempts with their reported results, one Settlement per outcome, in order.

    Call inside the caller's transaction, with the jobs' runs already locked. The job rows
    are locked in id order and written in a few statements whatever the number. The same
    result sent again by the attempt that settled its job is a duplicate: accepted, and
    nothing changes.
    """
    locked = RunnerJob.objects.select_for_update(of=("self",)).filter(
        pk__in=[o.job_id for o in outcomes]
    )
    jobs = {job.pk: job for job in locked.order_by("pk")}
    now = timezone.now()
    settlements: list[Settlement] = []
    ended: list[tuple[RunnerJob, Outcome]] = []
    for outcome in outcomes:
        job = jobs.get(outcome.job_id)
        if job is None or not holds(job, runner, outcome.lease_epoch):
            settlements.append(_settle_refusal(job, runner, outcome))
            continue
        job.status = JobStatus.SUCCEEDED if outcome.succeeded else JobStatus.FAILED
        job.reason = outcome.reason[:500]
        ended.append((job, outcome))
        settlements.append(Settlement(accepted=True, job=job, ended=True))
    if ended:
        _record_settled(ended, now)
    return settlements


def _settle_refusal(job: RunnerJob | None, runner: Runner, outcome: Outcome) -> Settlement:
    if (
        job is not None
        and job.status in (JobStatus.SUCCEEDED, JobStatus.FAILED)
        and job.leased_by_id == runner.pk
        and job.lease_epoch == outcome.lease_epoch
        and current_attempt(job).filter(result_digest=outcome.result_digest).exists()
    ):
        return Settlement(accepted=True, reason="duplicate", job=job, duplicate=True)
    reason = refusal(job, runner, outcome.lease_epoch)
    metrics.fenced("submit_job_result", reason)
    return Settlement(accepted=False, reason=reason)


def _record_settled(ended: list[tuple[RunnerJob, Outcome]], now: datetime) -> None:
    by_state: dict[tuple[str, str], list[RunnerJob]] = {}
    for job, _ in ended:
        by_state.setdefault((job.status, job.reason), []).append(job)
    for (status, reason), jobs in by_state.items():
        end(jobs, status, reason, now)
    _attempts_end(
        [
            (
                job.current_attempt_id,
                AttemptStatus.SUCCEEDED if outcome.succeeded else AttemptStatus.FAILED,
                outcome.result_digest,
                outcome.reason[:500],
            )
            for job, outcome in ended
            if job.current_attempt_id
        ],
        now,
    )


def _attempts_end(rows: list[tuple[int, str, str, str]], now: datetime) -> None:
    """End attempts, each with its own (status, result digest, reason): one statement."""
    if not rows:
        return
    table = JobAttempt._meta.db_table
    values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
    sql = (
        f"WITH ended(id, status, digest, reason) AS (VALUES {values})"
        f" UPDATE {table} SET status = ended.status, ended_at = %s,"
        f" result_digest = ended.digest, reason = ended.reason"
        f" FROM ended WHERE {table}.id = ended.id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [value for row in rows for value in row] + [now])


def job_fail(
    *, runner: Runner, job_id: int, lease_epoch: int, message: str, retryable: bool = False
) -> Settlement:
    """End the fenced attempt as failed: requeue it when retryable and attempts remain."""
    job = locked_job(job_id)
    if job is None or not holds(job, runner, lease_epoch):
        reason = refusal(job, runner, lease_epoch)
        metrics.fenced("fail_job", reason)
        return Settlement(accepted=False, reason=reason)
    now = timezone.now()
    current_attempt(job).update(status=AttemptStatus.FAILED, ended_at=now, reason=message[:500])
    if retryable and job.attempts < job.max_attempts:
        requeue([job], now, "retryable_failure")
        return Settlement(accepted=True, job=job, requeued=True)
    end([job], JobStatus.FAILED, message, now)
    return Settlement(accepted=True, job=job, ended=True)


def job_release(*, runner: Runner, job_id: int, lease_epoch: int) -> bool:
    """Give back a lease that never reached its caller: the job is claimable again at once."""
    now = timezone.now()
    with transaction.atomic():
        job = locked_job(job_id)
        if job is None or not holds(job, runner, lease_epoch):
            return False
        current_attempt(job).update(
            status=AttemptStatus.SUPERSEDED, ended_at=now, reason="lease not delivered"
        )
        # The attempt never ran: it is not counted against the job (the row is locked).
        write(
            job,
            status=JobStatus.QUEUED,
            leased_by=None,
            leased_until=None,
            attempts=job.attempts - 1,
        )
        wakeup.notify_owners([job.owner_id])
    return True
