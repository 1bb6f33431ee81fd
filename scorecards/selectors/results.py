"""A run's results as the API, MCP and the run page list them: in settlement order, filtered
by verdict, outputs cut to a preview in the database (a 1 MiB output never travels to be cut);
and what the run reply shows, bounded whatever the size of the run."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import F, QuerySet
from django.db.models.functions import Length, Substr

from core import prebuilt
from core.errors import Invalid
from core.fields import query_int
from scorecards.models import CaseResult, Dispatched, Run, RunEvent, Verdict
from scorecards.selectors.cursors import cursor_decode
from scorecards.selectors.hosts import ByHost, run_by_host
from scorecards.selectors.summary import budget_figures, run_summary, waiting_summary

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
    return query_int("limit", value, default=RESULTS_PAGE, lowest=1, highest=MAX_RESULTS_PAGE)


def last_result_seq(run: Run) -> int:
    """The settlement number of the run's last result (0 before the first): read on every
    settle, so written out rather than compiled each time. The last row of the (run, seq)
    index, read backwards: what `MAX` becomes only when the planner expects the run to have
    many results, which a run's first minutes on tables the statistics have not caught up
    with do not show it (it then reads all of them, on each settle)."""
    alias = CaseResult.objects.db
    table = prebuilt.table(CaseResult, alias)
    seq = prebuilt.column(CaseResult, "seq", alias)
    of_run = prebuilt.column(CaseResult, "run", alias)
    with prebuilt.cursor(alias) as cursor:
        cursor.execute(
            f"SELECT {seq} FROM {table} WHERE {of_run} = %s ORDER BY {seq} DESC LIMIT 1", [run.pk]
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


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
            verdict_by_name=F("verdict_by__username"),
            output_head=Substr("output", 1, OUTPUT_PREVIEW_BYTES),
            output_chars=Length("output"),
        )
        .defer("output", "stderr_tail", "fingerprint")
        .order_by("seq")
    )


def results_after(
    run: Run, *, verdicts: Sequence[str] = (), after: int | None = None, limit: int = RESULTS_PAGE
) -> tuple[list[CaseResult], int | None]:
    """Up to `limit` results settled after `after` (a seq), as `with_previews` reads them, and
    the seq to continue from (None at the end)."""
    rows = results_of(run, verdicts)
    if after is not None:
        rows = rows.filter(seq__gt=after)
    chosen = list(rows.values_list("pk", "seq")[: limit + 1])
    more = len(chosen) > limit
    chosen = chosen[:limit]
    return with_previews([pk for pk, _ in chosen]), chosen[-1][1] if more else None


def results_page(
    run: Run, *, verdict: str | None = None, cursor: str | None = None, limit: Any = None
) -> tuple[list[CaseResult], int | None]:
    """A page of results as MCP asks for it (a bare cursor, a verdict filter and a limit, each
    checked), and the seq to continue from."""
    return results_after(
        run,
        verdicts=verdicts_parse(verdict),
        after=cursor_decode(cursor),
        limit=limit_parse(limit),
    )


@dataclass(frozen=True)
class RunOverview:
    """A run as `GET /api/runs/<id>` shows it: its summary, the newest events (oldest first)
    and the first settled results, with the seq to continue from."""

    run: Run
    summary: dict[str, Any]
    events: Sequence[RunEvent]
    results: list[CaseResult]
    last: int | None
    by_host: ByHost | None = None


def run_overview(run: Run) -> RunOverview:
    """The run's summary, newest events and first results, bounded whatever the size of the
    run; a run just started is read from what its start wrote (nothing read back)."""
    if run.dispatched is not None:
        return _started(run, run.dispatched)
    results, last = results_after(run, limit=RESULTS_PAGE)
    newest = list(run.events.order_by("-at", "-id")[:RUN_REPLY_EVENTS])
    return RunOverview(
        run=run,
        summary=run_summary(run),
        events=newest[::-1],
        results=results,
        last=last,
        by_host=run_by_host(run),
    )


def _started(run: Run, dispatched: Dispatched) -> RunOverview:
    """Every job waiting, no result yet, the start's events: the same fields as `run_overview`."""
    return RunOverview(
        run=run,
        summary={**waiting_summary(dispatched.jobs), **budget_figures(run, 0)},
        events=dispatched.events[-RUN_REPLY_EVENTS:],
        results=[],
        last=None,
    )
