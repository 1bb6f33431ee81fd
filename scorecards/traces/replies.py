"""Reply shapes of a case's trace and screens, shared by the REST API, the pages, the run
page's socket and MCP (`get_case_trace`)."""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlencode

from pydantic import Field

from core.replies import Reply
from runnercli.protocol.steps import elapsed
from scorecards.traces.models import CaseTrace, ScreenFrame, TraceEvent
from scorecards.traces.selectors import CaseAttempt, RunningCase, TracePage
from scorecards.traces.steps import current_step


def case_query(where: CaseAttempt, **extra: Any) -> str:
    """`key=K[&repeat=N]…`: the case's part of a trace or screens URL."""
    query: dict[str, Any] = {"key": where.job.case_key}
    if where.run.repeats > 1:
        query["repeat"] = where.job.repeat
    return urlencode({**query, **extra})


def frame_url(where: CaseAttempt, n: int | str) -> str:
    query = case_query(where, **({"attempt": where.attempt.epoch} if where.attempt else {}))
    return f"/api/runs/{where.run.pk}/screens/{n}?{query}"


class Step(Reply):
    """What the case is doing: its newest open tool call, else its last activity."""

    label: str = Field(description='"Bash `npm test`", "thinking", "writing", "done", …')
    since: int | None = Field(description="Since when, epoch ms.")
    open: bool = Field(description="A tool call not answered yet.")
    text: str = Field(description='As the run page says it: "Bash `npm test` · 40 s".')
    age_ms: int | None = Field(description="How long ago `since` was, as this reply was made.")

    @classmethod
    def of(cls, trace: CaseTrace | None) -> Step | None:
        if trace is None:
            return None
        step = current_step(trace.state)
        since, text, age = step["since"], step["label"], None
        if since is not None:
            age = max(0, int(time.time() * 1000) - since)
            text += f" · {elapsed(age)}"
        return cls(label=step["label"], since=since, open=step["open"], text=text, age_ms=age)


class Totals(Reply):
    tool_calls: int = 0
    tool_errors: int = 0
    errors: int = 0
    raw: int = Field(
        default=0, description="Events the runner's parser did not know, kept whole as `raw`."
    )
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cost_usd: float | None = Field(default=None, description="Reported: provenance, not billed.")


# With `brief`, an event bigger than this has its data cut to a preview (`clipped: true`):
# a timeline's first page stays small whatever the tools printed; a click reads it whole.
BRIEF_EVENT_BYTES = 1024
BRIEF_TEXT_CHARS = 200
BRIEF_ITEMS = 8


def preview(value: Any) -> Any:
    """`value` with long strings cut and long lists shortened."""
    if isinstance(value, str):
        return value if len(value) <= BRIEF_TEXT_CHARS else value[:BRIEF_TEXT_CHARS] + "…"
    if isinstance(value, dict):
        return {k: preview(v) for k, v in list(value.items())[: BRIEF_ITEMS * 4]}
    if isinstance(value, list):
        return [preview(v) for v in value[:BRIEF_ITEMS]]
    return value


class TraceEventItem(Reply):
    seq: int
    ts: int = Field(description="Epoch milliseconds.")
    kind: str
    name: str
    # `data` on the wire (`Reply.data()` is the reply's own JSON).
    data_: dict[str, Any] = Field(alias="data")
    clipped: bool = Field(default=False, description="`data` is a preview (asked `brief`).")

    @classmethod
    def of(cls, row: TraceEvent, brief: bool = False) -> TraceEventItem:
        fields = {"seq": row.seq, "ts": row.ts, "kind": row.kind, "name": row.name}
        if brief and row.size > BRIEF_EVENT_BYTES:
            return cls.model_validate({**fields, "data": preview(row.data), "clipped": True})
        return cls.model_validate({**fields, "data": row.data})


class TraceReply(Reply):
    """A page of a case's trace (one attempt), with what the whole trace says so far."""

    case: str
    repeat: int
    attempt: int | None = Field(description="The attempt's epoch (the job's current one).")
    running: bool
    kept: int = Field(description="Events stored.")
    dropped: int = Field(description="Events left out past the case's bounds.")
    last_seq: int
    first_ts: int | None
    last_ts: int | None
    step: Step | None
    totals: Totals
    parser: str | None = Field(
        description='The parser of the agent\'s stream and the version it read: "claude 2.1.197".'
    )
    events: list[TraceEventItem]
    next_after_seq: int | None = Field(description="Pass as `after_seq` for the next page.")

    @classmethod
    def of(cls, page: TracePage, brief: bool = False) -> TraceReply:
        where, trace = page.case, page.trace
        totals = dict((trace.state if trace else {}).get("totals", {}))
        totals.pop("final", None)
        return cls(
            case=where.job.case_key,
            repeat=where.job.repeat,
            attempt=where.attempt.epoch if where.attempt else None,
            running=where.running,
            kept=trace.kept if trace else 0,
            dropped=trace.dropped if trace else 0,
            last_seq=trace.last_seq if trace else -1,
            first_ts=trace.first_ts if trace else None,
            last_ts=trace.last_ts if trace else None,
            step=Step.of(trace),
            totals=Totals.model_validate(totals),
            parser=page.parser,
            events=[TraceEventItem.of(row, brief) for row in page.events],
            next_after_seq=page.events[-1].seq if page.more else None,
        )


class FrameItem(Reply):
    n: int = Field(description="Which frame of the attempt, counting every one it sent.")
    taken_at: int = Field(description="Epoch milliseconds.")
    media_type: str
    trace_seq: int = Field(description="The trace's last seq when it came: its step.")
    url: str

    @classmethod
    def of(cls, where: CaseAttempt, frame: ScreenFrame) -> FrameItem:
        return cls(
            n=frame.n,
            taken_at=frame.taken_at,
            media_type=frame.media_type,
            trace_seq=frame.trace_seq,
            url=frame_url(where, frame.n),
        )


class LiveFrame(Reply):
    """The newest frame of a running case (kept in the cache only, while it runs)."""

    n: int
    taken_at: int
    url: str = Field(description="Changes with each new frame.")

    @classmethod
    def of(cls, live: dict[str, Any], url: str) -> LiveFrame:
        sep = "&" if "?" in url else "?"
        return cls(n=live["n"], taken_at=live["taken_at"], url=f"{url}{sep}v={live['n']}")


class ScreensReply(Reply):
    """A case's filmstrip (at most 60 frames of one attempt) and, while it runs, its newest."""

    case: str
    repeat: int
    attempt: int | None
    running: bool
    live: LiveFrame | None
    frames: list[FrameItem]

    @classmethod
    def of(
        cls, where: CaseAttempt, frames: list[ScreenFrame], live: dict[str, Any] | None
    ) -> ScreensReply:
        return cls(
            case=where.job.case_key,
            repeat=where.job.repeat,
            attempt=where.attempt.epoch if where.attempt else None,
            running=where.running,
            live=LiveFrame.of(live, frame_url(where, "live")) if live else None,
            frames=[FrameItem.of(where, frame) for frame in frames],
        )


class RunningCaseItem(Reply):
    """A running case as the run page shows it: its step and its newest frame."""

    job: int
    case: str
    repeat: int
    step: Step | None
    frame: LiveFrame | None

    @classmethod
    def of(cls, run_id: int, repeats: int, running: RunningCase) -> RunningCaseItem:
        job = running.job
        query: dict[str, Any] = {"key": job.case_key}
        if repeats > 1:
            query["repeat"] = job.repeat
        url = f"/api/runs/{run_id}/screens/live?{urlencode(query)}"
        live = running.live
        return cls(
            job=job.pk,
            case=job.case_key,
            repeat=job.repeat,
            step=Step.of(running.trace),
            frame=LiveFrame.of(live, url) if live else None,
        )


class RunningCases(Reply):
    cases: list[RunningCaseItem]
