"""A run's results as the API, MCP and the run page list them: in settlement order, filtered
by verdict, outputs cut to a preview in the database (a 1 MiB output never travels to be cut);
and the run reply built from them, bounded whatever the size of the run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import urlencode

from django.db.models import F, QuerySet
from django.db.models.functions import Length, Substr
from django.urls import reverse

from core.errors import Invalid
from scorecards.models import CaseResult, Dispatched, Run, RunEvent, Verdict
from scorecards.replies import (
    ResultPage,
    RunEventItem,
    RunReply,
    RunResultItem,
    RunSummary,
    VersionRef,
)
from scorecards.selectors.cursors import cursor_decode, cursor_encode
from scorecards.selectors.summary import mean_and_stderr, run_summary

RESULTS_PAGE = 100
MAX_RESULTS_PAGE = 1000
RUN_REPLY_EVENTS = 50
OUTPUT_PREVIEW_BYTES = 1024
FAILURES = "fail,error"


def verdicts_parse(value: str | None) -> list[str]:
    """`pass`, `fail`, `error` or a comma-separated list of them (`fail,error`)."""
    if not value:
        return []
    chosen = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in chosen if v not in Verdict.values]
    if unknown or not chosen:
        raise Invalid({"verdict": [f"Unknown verdict {value!r}: use pass, fail or error."]})
    return chosen


def limit_parse(value: str | int | None) -> int:
    if value is None or value == "":
        return RESULTS_PAGE
    text = str(value)
    if not text.isdigit() or not 1 <= int(text) <= MAX_RESULTS_PAGE:
        raise Invalid({"limit": [f"Must be an integer from 1 to {MAX_RESULTS_PAGE}."]})
    return int(text)


def results_of(run: Run, verdicts: Sequence[str] = ()) -> QuerySet[CaseResult]:
    """The run's results in settlement order, as bare rows (id and seq): the page is chosen
    on the (run, seq) index first, and only its rows are read whole (`with_previews`)."""
    results = CaseResult.objects.filter(run=run)
    if verdicts:
        results = results.filter(verdict__in=list(verdicts))
    return results.only("pk", "seq").order_by("seq")


def with_previews(ids: Sequence[int]) -> list[CaseResult]:
    """These results, in settlement order, each with a preview of its output cut by the
    database (a 1 MiB output never travels to be cut) instead of the output itself.

    Kept apart from choosing the page: computed in the same query as the page's order and
    limit, the previews could be evaluated for every row of the run before the limit."""
    return list(
        CaseResult.objects.filter(pk__in=list(ids))
        .annotate(
            case_key=F("case__key"),
            output_head=Substr("output", 1, OUTPUT_PREVIEW_BYTES),
            output_chars=Length("output"),
        )
        .defer("output", "stderr_tail", "fingerprint")
        .order_by("seq")
    )


def _cut(text: str, limit: int) -> str:
    """At most `limit` bytes of UTF-8, never half a character."""
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode("utf-8", errors="ignore")


def result_item(row: Any) -> RunResultItem:
    """One row of `with_previews` as it is listed."""
    head = _cut(row.output_head, OUTPUT_PREVIEW_BYTES)
    return RunResultItem(
        case=row.case_key,
        repeat=row.repeat,
        seq=row.seq,
        verdict=row.verdict,
        score=row.score,
        status=row.status,
        output=head,
        output_truncated=len(head) < row.output_chars,
        error=row.error,
        reason=row.reason,
        duration_ms=row.duration_ms,
        usage=row.usage,
        provenance=row.provenance,
        runner=row.runner_id,
    )


def result_items(rows: Iterable[Any]) -> list[RunResultItem]:
    return [result_item(row) for row in rows]


def results_after(
    run: Run, *, verdicts: Sequence[str] = (), after: int | None = None, limit: int = RESULTS_PAGE
) -> tuple[list[RunResultItem], int | None]:
    """Up to `limit` results settled after `after` (a seq), and the seq to continue from."""
    rows = results_of(run, verdicts)
    if after is not None:
        rows = rows.filter(seq__gt=after)
    chosen = list(rows.values_list("pk", "seq")[: limit + 1])
    more = len(chosen) > limit
    chosen = chosen[:limit]
    items = result_items(with_previews([pk for pk, _ in chosen]))
    return items, chosen[-1][1] if more else None


def results_page(
    run: Run, *, verdict: str | None = None, cursor: str | None = None, limit: Any = None
) -> ResultPage:
    """A page of results for MCP: the bare cursor instead of DRF's URLs."""
    items, last = results_after(
        run,
        verdicts=verdicts_parse(verdict),
        after=cursor_decode(cursor),
        limit=limit_parse(limit),
    )
    return ResultPage(results=items, next_cursor=cursor_encode(last) if last else None)


def run_reply(run: Run, *, base_url: str = "") -> RunReply:
    """The run as `GET /api/runs/<id>` shows it: the summary, the newest events and the first
    settled results; `results_next` (under `base_url`) pages through the rest."""
    if run.dispatched is not None:
        return _started_reply(run, run.dispatched)
    items, last = results_after(run, limit=RESULTS_PAGE)
    newest = list(run.events.order_by("-at", "-id")[:RUN_REPLY_EVENTS])
    cursor = cursor_encode(last) if last else None
    next_url = None
    if cursor:
        path = reverse("api-run-results", args=[run.pk])
        next_url = f"{base_url}{path}?{urlencode({'cursor': cursor})}"
    return _reply(
        run,
        summary=RunSummary.model_validate(run_summary(run)),
        events=list(reversed(newest)),
        results=items,
        next_url=next_url,
        cursor=cursor,
    )


def _reply(
    run: Run,
    *,
    summary: RunSummary,
    events: Sequence[RunEvent],
    results: list[RunResultItem],
    next_url: str | None,
    cursor: str | None,
) -> RunReply:
    return RunReply(
        id=run.pk,
        workspace=run.workspace.slug,
        harness=VersionRef(name=run.harness.name, version=run.harness.version),
        dataset=VersionRef(name=run.dataset.name, version=run.dataset.version),
        status=run.status,
        runtime=run.runtime,
        concurrency=run.concurrency,
        repeats=run.repeats,
        parent=run.parent_id,
        rerun_of=run.rerun_of,
        metadata=run.metadata or {},
        submitted_by=run.submitted_by.get_username(),
        created_at=run.created_at,
        finished_at=run.finished_at,
        summary=summary,
        events=[RunEventItem(at=e.at, level=e.level, message=e.message) for e in events],
        results=results,
        results_next=next_url,
        next_cursor=cursor,
    )


def _started_reply(run: Run, dispatched: Dispatched) -> RunReply:
    """The reply to a run's start, from what the start wrote (read nothing back): every job
    waiting, no result yet, the start's events. The same fields as `run_reply`."""
    summary = {
        "total": dispatched.jobs,
        "pending": dispatched.jobs,
        "running": 0,
        "pass": 0,
        "fail": 0,
        "error": 0,
        "canceled": 0,
        "pass_rate": None,
        "mean_score": None,
        **mean_and_stderr(0, 0.0, 0.0),
        "cases": 0,
        "flaky": 0,
        "cost_usd": 0.0,
    }
    return _reply(
        run,
        summary=RunSummary.model_validate(summary),
        events=dispatched.events[-RUN_REPLY_EVENTS:],
        results=[],
        next_url=None,
        cursor=None,
    )
