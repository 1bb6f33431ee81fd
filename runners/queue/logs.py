"""A job's log lines, bounded per job: at most EVERDICT_MAX_LOG_LINES_PER_JOB lines and
EVERDICT_MAX_LOG_BYTES_PER_JOB bytes are kept; past either bound nothing more is, and one
marker line — the job's last — says how many were dropped, its count kept current.

The counters live on the job row and change in the transaction that inserts the lines,
with the row locked: concurrent reports of one job never overshoot the bounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from runnercli.protocol import Ack
from runners.models import JobLogLine, Runner, RunnerJob
from runners.queue.fence import RESUMED, holds, refused, take_back
from runners.queue.rows import locked_job


def dropped_marker(dropped: int) -> str:
    return (
        f"… {dropped} line{'s' if dropped != 1 else ''} dropped: this case's log is over its "
        f"bound ({settings.EVERDICT_MAX_LOG_LINES_PER_JOB} lines, "
        f"{settings.EVERDICT_MAX_LOG_BYTES_PER_JOB} bytes)"
    )


def _storable(line: str) -> str:
    # PostgreSQL text cannot hold NUL; a harness printing binary must not lose its log.
    return line.replace("\x00", "\ufffd")


def logs_append(job: RunnerJob, lines: Sequence[str], epoch: int, now: datetime) -> int:
    """Append lines to a job's log within its bounds (the job row is locked by the caller);
    return how many were kept."""
    if not lines:
        return 0
    rows, kept = log_lines(job, lines, epoch, now)
    JobLogLine.objects.bulk_create(rows)
    RunnerJob.objects.filter(pk=job.pk).update(
        log_kept=job.log_kept, log_bytes=job.log_bytes, log_dropped=job.log_dropped
    )
    return kept


def log_lines(
    job: RunnerJob, lines: Sequence[str], epoch: int, now: datetime
) -> tuple[list[JobLogLine], int]:
    """The log rows to insert for these lines of a job (the job row is locked by the caller),
    and how many of the lines are kept. The job's counters (`log_kept`, `log_bytes`,
    `log_dropped`) are advanced on the object; the caller writes them to its row. Past a
    bound, the job's dropped marker is updated here when it has one already."""
    if not lines:
        return [], 0
    kept, size = _within_bounds(job, lines, epoch, now)
    dropped = len(lines) - len(kept)
    rows = list(kept)
    if dropped and job.log_dropped:
        # Once anything is dropped nothing more is kept: the marker is the job's last line.
        marker = JobLogLine.objects.filter(job_id=job.pk).order_by("-pk").values("pk")[:1]
        JobLogLine.objects.filter(pk__in=marker).update(
            line=dropped_marker(job.log_dropped + dropped)
        )
    elif dropped:
        rows.append(_line(job, epoch, now, dropped_marker(dropped)))
    # The row is locked: its counters become what was read plus what was added.
    job.log_kept += len(kept)
    job.log_bytes += size
    job.log_dropped += dropped
    return rows, len(kept)


def _within_bounds(
    job: RunnerJob, lines: Sequence[str], epoch: int, now: datetime
) -> tuple[list[JobLogLine], int]:
    """The lines the job's log still has room for, and their size in bytes."""
    kept: list[JobLogLine] = []
    size = 0
    if job.log_dropped:
        return kept, size
    room_lines = settings.EVERDICT_MAX_LOG_LINES_PER_JOB - job.log_kept
    room_bytes = settings.EVERDICT_MAX_LOG_BYTES_PER_JOB - job.log_bytes
    for line in lines:
        text = _storable(line)
        if len(kept) >= room_lines or size + len(text.encode()) > room_bytes:
            break
        kept.append(_line(job, epoch, now, text))
        size += len(text.encode())
    return kept, size


def _line(job: RunnerJob, epoch: int, now: datetime, text: str) -> JobLogLine:
    return JobLogLine(job_id=job.pk, run_id=job.run_id, epoch=epoch, at=now, line=text)


def job_report_log(*, runner: Runner, job_id: int, lease_epoch: int, lines: Sequence[str]) -> Ack:
    """Append log lines to the job's run, read from the lease, never from the caller.

    A holder whose lease lapsed takes it back first: its case is still running.
    """
    now = timezone.now()
    with transaction.atomic():
        job = locked_job(job_id)
        resumed = job is not None and not holds(job, runner, lease_epoch)
        if job is None or not take_back(job, runner, lease_epoch, now):
            return refused("report_case_log", job, runner, lease_epoch)
        logs_append(job, lines, lease_epoch, now)
    return Ack(accepted=True, reason=RESUMED if resumed else "")
