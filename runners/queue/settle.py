"""Settling fenced attempts with the results their runners report, and keeping the refused
late ones as shadows on their attempt."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.utils import timezone

from core import prebuilt
from runners import metrics
from runners.models import AttemptStatus, JobAttempt, JobLogLine, JobStatus, Runner, RunnerJob
from runners.queue.fence import RESUMED, Settlement, holds, refusal, take_back
from runners.queue.logs import log_lines
from runners.queue.rows import current_attempt

# Said in the ack of a refused late result that was kept.
KEPT = "kept as a shadow result (not counted)"


@dataclass(frozen=True)
class Outcome:
    """A result a runner reports for one fenced attempt, as the queue records it.

    `shadow`, called only if the fence refuses the result, gives what to keep on the attempt
    (opaque to the queue, bounded by the caller) and a note saying how it was cut, if it was.
    """

    job_id: int
    lease_epoch: int
    succeeded: bool
    result_digest: str
    reason: str = ""
    shadow: Callable[[], tuple[Any, str]] | None = None
    # Lines for the job's log that ride with the result (its start and outcome lines, say),
    # appended within the job's log bounds when the result is accepted.
    log_tail: Sequence[str] = ()


def jobs_settle(*, runner: Runner, outcomes: Sequence[Outcome]) -> list[Settlement]:
    """End fenced attempts with their reported results, one Settlement per outcome, in order.

    Call inside the caller's transaction, with the jobs' runs already locked. The job rows
    are locked in id order and written in a few statements whatever the number. The same
    result sent again by the attempt that settled its job is a duplicate: accepted, and
    nothing changes. A holder whose lease lapsed takes it back and settles it (`resumed`);
    a refused result of the runner's own attempt is kept on that attempt as a shadow.
    """
    jobs = {job.pk: job for job in locked_jobs([o.job_id for o in outcomes])}
    now = timezone.now()
    settlements: list[Settlement] = []
    ended: list[tuple[RunnerJob, Outcome]] = []
    for outcome in outcomes:
        job = jobs.get(outcome.job_id)
        resumed = job is not None and not holds(job, runner, outcome.lease_epoch)
        if job is None or not take_back(job, runner, outcome.lease_epoch, now):
            settlements.append(_settle_refusal(job, runner, outcome, now))
            continue
        job.status = JobStatus.SUCCEEDED if outcome.succeeded else JobStatus.FAILED
        job.reason = outcome.reason[:500]
        ended.append((job, outcome))
        settlements.append(
            Settlement(
                accepted=True,
                reason=RESUMED if resumed else "",
                job=job,
                ended=True,
                resumed=resumed,
            )
        )
    if ended:
        _record_settled(ended, now)
    return settlements


def locked_jobs(job_ids: Sequence[int]) -> list[RunnerJob]:
    """The jobs, locked in id order (on SQLite the transaction's write lock stands for the
    row locks): one written-out statement, no query compiled per call."""
    if not job_ids:
        return []
    alias = RunnerJob.objects.db
    job = prebuilt.columns(RunnerJob, alias)
    ids = ", ".join(["%s"] * len(job_ids))
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    select = prebuilt.select_from(RunnerJob, alias, "j")
    sql = f"{select} WHERE j.id IN ({ids}) ORDER BY j.id{lock}"
    with prebuilt.cursor(alias) as cursor:
        cursor.execute(sql, list(job_ids))
        return [job.instance(alias, row) for row in cursor.fetchall()]


def _settle_refusal(
    job: RunnerJob | None, runner: Runner, outcome: Outcome, now: datetime
) -> Settlement:
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
    if job is not None and _keep_shadow(job, runner, outcome, reason, now):
        reason = f"{reason} — {KEPT}"
    return Settlement(accepted=False, reason=reason)


def _keep_shadow(
    job: RunnerJob, runner: Runner, outcome: Outcome, reason: str, now: datetime
) -> bool:
    """Keep a refused result on the runner's own attempt of that epoch, unless that attempt
    settled with a result of its own: what a member's machine computed is never lost."""
    if outcome.shadow is None or job.owner_id != runner.owner_id:
        return False
    attempt = JobAttempt.objects.filter(
        job_id=job.pk, epoch=outcome.lease_epoch, runner_id=runner.pk, result_digest=""
    )
    if not attempt.exists():
        return False
    shadow, note = outcome.shadow()
    why = f"{reason}; {note}" if note else reason
    kept = attempt.update(shadow_result=shadow, shadow_at=now, shadow_reason=why[:500])
    if kept:
        metrics.SHADOWS.inc()
    return kept == 1


def _record_settled(ended: list[tuple[RunnerJob, Outcome]], now: datetime) -> None:
    """Write what the settled jobs became: the jobs in one UPDATE (each its own status, reason
    and log counters), their attempts in one, the lines riding with their results in one
    INSERT."""
    lines: list[JobLogLine] = []
    for job, outcome in ended:
        rows, _ = log_lines(job, outcome.log_tail, job.lease_epoch, now)
        lines += rows
        job.finished_at = now
        job.leased_until = None
        metrics.SETTLED.labels(status=job.status).inc()
    _jobs_end([job for job, _ in ended], now)
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
    if lines:
        prebuilt.insert_many(lines, JobLogLine.objects.db)


def _jobs_end(jobs: list[RunnerJob], now: datetime) -> None:
    """End jobs, each with its own (status, reason, log counters): one statement."""
    _update_each(
        RunnerJob,
        ("status", "reason", "log_kept", "log_bytes", "log_dropped"),
        [(j.pk, j.status, j.reason, j.log_kept, j.log_bytes, j.log_dropped) for j in jobs],
        "finished_at = %s, leased_until = NULL",
        now,
    )


def _attempts_end(rows: list[tuple[int, str, str, str]], now: datetime) -> None:
    """End attempts, each with its own (status, result digest, reason): one statement."""
    _update_each(JobAttempt, ("status", "result_digest", "reason"), rows, "ended_at = %s", now)


def _update_each(
    model: type[Any],
    columns: tuple[str, ...],
    rows: list[tuple[Any, ...]],
    also: str,
    now: datetime,
) -> None:
    """One UPDATE giving each row (id first, then `columns`) its own values, plus `also`
    (an assignment taking `now`) for all of them."""
    if not rows:
        return
    table = model._meta.db_table
    names = ", ".join(f"c{i}" for i in range(len(columns)))
    values = ", ".join(["(" + ", ".join(["%s"] * (len(columns) + 1)) + ")"] * len(rows))
    assign = ", ".join(f"{column} = given.c{i}" for i, column in enumerate(columns))
    sql = (
        f"WITH given(id, {names}) AS (VALUES {values})"
        f" UPDATE {table} SET {assign}, {also}"
        f" FROM given WHERE {table}.id = given.id"
    )
    with prebuilt.cursor(connection.alias) as cursor:
        cursor.execute(sql, [value for row in rows for value in row] + [now])
