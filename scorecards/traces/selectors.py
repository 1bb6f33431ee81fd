"""Reads of a case's trace and screens, for members of the run's workspace (anyone else is
told the run does not exist): the attempt a case key names, its timeline in pages by seq,
its filmstrip and its frames, and the running cases of a run with their current step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.errors import NotFound
from core.fields import ascii_int, query_int
from runners.models import JobAttempt, JobStatus, RunnerJob
from scorecards.blobs.services import blob_open
from scorecards.links import key_may_exist
from scorecards.models import CaseResult, Run
from scorecards.selectors.runs import repeat_of, run_get
from scorecards.traces.models import CaseTrace, ScreenFrame, TraceEvent
from scorecards.traces.screens import live_frame, live_frames

if TYPE_CHECKING:
    from django.contrib.auth.models import User

TRACE_PAGE = 200
MAX_TRACE_PAGE = 1000
RUNNING_CASES = 100


@dataclass(frozen=True)
class CaseAttempt:
    """The attempt of a case a read is about: the job's current one unless asked otherwise."""

    run: Run
    job: RunnerJob
    attempt: JobAttempt | None

    @property
    def running(self) -> bool:
        return self.job.status == JobStatus.LEASED


def case_attempt(
    *,
    user: User,
    run_id: int,
    key: str,
    repeat: str | int | None = None,
    attempt: str | int | None = None,
) -> CaseAttempt:
    """The case's job on this repeat and the attempt asked for (by its epoch), by default the
    job's current one; NotFound when the run has no such case."""
    return attempt_of(run_get(user=user, run_id=run_id), key, repeat, attempt)


def attempt_of(
    run: Run, key: str, repeat: str | int | None, attempt: str | int | None = None
) -> CaseAttempt:
    """`case_attempt` of a run the caller may see already."""
    jobs = RunnerJob.objects.filter(run=run, case_key=key, repeat=repeat_of(run, repeat))
    job = jobs.first() if key_may_exist(key) else None
    if job is None:
        raise NotFound(f"Case {key!r} not found in run {run.pk}.")
    epoch = query_int("attempt", attempt)
    if epoch is None:
        chosen = JobAttempt.objects.filter(pk=job.current_attempt_id or 0).first()
    else:
        chosen = JobAttempt.objects.filter(job=job, epoch=epoch).first()
        if chosen is None:
            raise NotFound(f"Case {key!r} has no attempt {epoch}.")
    return CaseAttempt(run=run, job=job, attempt=chosen)


# The tool whose stream each parsed `output` is.
STREAM_TOOLS = {"claude-stream-json": "claude", "codex-jsonl": "codex"}


@dataclass(frozen=True)
class TracePage:
    case: CaseAttempt
    trace: CaseTrace | None
    events: list[TraceEvent]
    more: bool
    # Which parser read the agent's stream, with the tool's version: "claude 2.1.197".
    parser: str | None = None


def stream_parser_of(where: CaseAttempt) -> str | None:
    """The tool whose stream the runner parsed for this attempt, and its version as the
    attempt's result reported it: "claude 2.1.197" (the tool alone before a result)."""
    if where.job.kind != "case" or where.attempt is None:
        return None
    tool = STREAM_TOOLS.get(str(where.run.harness.spec.get("output", "")))
    if tool is None:
        return None
    fingerprints = CaseResult.objects.filter(attempt_id=where.attempt.pk).values_list(
        "fingerprint", flat=True
    )
    tools = next(iter(fingerprints), None) or {}
    tools = tools.get("tools") if isinstance(tools, dict) else None
    version = tools.get(tool) if isinstance(tools, dict) else None
    return f"{tool} {version}" if isinstance(version, str) and version else tool


def trace_page(where: CaseAttempt, *, after_seq: Any = None, limit: Any = None) -> TracePage:
    """The attempt's events after `after_seq` (-1: from the first), at most `limit`."""
    after = None if after_seq == "-1" else query_int("after_seq", after_seq)
    size = query_int("limit", limit, default=TRACE_PAGE, lowest=1, highest=MAX_TRACE_PAGE)
    if where.attempt is None:
        return TracePage(where, None, [], False)
    trace = CaseTrace.objects.filter(pk=where.attempt.pk).first()
    if trace is None:
        return TracePage(where, None, [], False, stream_parser_of(where))
    # Events and the trace row are written in one transaction, but read here in two
    # statements: those past the row read are left for the next page, so the page's step and
    # totals always cover its events.
    rows = TraceEvent.objects.filter(attempt_id=where.attempt.pk, seq__lte=trace.last_seq)
    rows = rows.order_by("seq")
    if after is not None:
        rows = rows.filter(seq__gt=after)
    page = list(rows[: size + 1])
    return TracePage(where, trace, page[:size], len(page) > size, stream_parser_of(where))


def filmstrip(where: CaseAttempt) -> list[ScreenFrame]:
    if where.attempt is None:
        return []
    return list(ScreenFrame.objects.filter(attempt_id=where.attempt.pk).order_by("n"))


def live_of(where: CaseAttempt) -> dict[str, Any] | None:
    """The case's newest frame while it runs (the cache's), if it is of this attempt."""
    if not where.running or where.attempt is None:
        return None
    frame = live_frame(where.job.pk)
    return frame if frame is not None and frame["attempt"] == where.attempt.pk else None


def frame_bytes(where: CaseAttempt, n: str) -> tuple[str, bytes]:
    """A frame's media type and bytes: the `n`-th of the filmstrip, or `live`."""
    if n == "live":
        live = live_of(where)
        if live is None:
            raise NotFound("The case shows no live frame.")
        return live["media_type"], live["data"]
    number = ascii_int(n)
    frame = None
    if number is not None and where.attempt is not None:
        frame = ScreenFrame.objects.filter(attempt_id=where.attempt.pk, n=number).first()
    if frame is None:
        raise NotFound(f"No frame {n} in this case's filmstrip.")
    with blob_open(frame.blob) as handle:
        return frame.media_type, bytes(handle.read())


@dataclass(frozen=True)
class RunningCase:
    job: RunnerJob
    trace: CaseTrace | None
    live: dict[str, Any] | None


def running_cases(run: Run) -> list[RunningCase]:
    """The run's running cases (at most RUNNING_CASES), each with its trace row and live frame."""
    jobs = list(
        RunnerJob.objects.filter(run=run, status=JobStatus.LEASED)
        .only("pk", "case_key", "repeat", "current_attempt_id", "status")
        .order_by("seq")[:RUNNING_CASES]
    )
    attempts = [job.current_attempt_id for job in jobs if job.current_attempt_id]
    traces = {t.pk: t for t in CaseTrace.objects.filter(pk__in=attempts).defer("run", "job")}
    frames = live_frames([job.pk for job in jobs])
    found = []
    for job in jobs:
        live = frames.get(job.pk)
        if live is not None and live["attempt"] != job.current_attempt_id:
            live = None
        found.append(RunningCase(job, traces.get(job.current_attempt_id or 0), live))
    return found
