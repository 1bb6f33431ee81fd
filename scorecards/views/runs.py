"""The run page (live, paged and filtered results), canceling a run, and rerunning its failed or
unfinished cases."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.db.models import Max
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounts.authentication import signed_in
from core.errors import Forbidden, Invalid
from core.replies import data
from runners.models import JobLogLine
from scorecards.links import case_url
from scorecards.models import Role, Run
from scorecards.replies.results import result_items
from scorecards.replies.runs import RunReply
from scorecards.selectors.cursors import cursor_decode, cursor_encode
from scorecards.selectors.results import (
    FAILURES,
    RESULTS_PAGE,
    last_result_seq,
    results_after,
    run_overview,
    verdicts_parse,
)
from scorecards.selectors.runs import (
    comparable_runs,
    harness_versions,
    run_baseline,
    run_get,
    runtime_label,
)
from scorecards.selectors.summary import case_tallies, run_summary, score_distribution
from scorecards.selectors.waiting import run_waiting
from scorecards.selectors.workspaces import membership_for
from scorecards.services import RERUN_CHOICES, run_cancel, run_rerun
from scorecards.views.common import error_text, page, result_rows

INITIAL_LOG_LINES = 500
FILTERS = (
    ("", "All"),
    (FAILURES, "Failures"),
    ("pass", "Pass"),
    ("fail", "Fail"),
    ("error", "Error"),
)


def _log_tail(run: Run) -> list[dict[str, Any]]:
    """The newest log lines, oldest first: the live panel continues after the last one."""
    rows = list(
        JobLogLine.objects.filter(run=run)
        .order_by("-pk")
        .values_list("pk", "at", "job__case_key", "line")[:INITIAL_LOG_LINES]
    )
    return [{"seq": s, "at": at, "case": c, "line": line} for s, at, c, line in reversed(rows)]


def _page_of_results(run: Run, request: HttpRequest) -> dict[str, Any]:
    """The page of results the query asks for (verdict filter, cursor), each with its case's
    passes over settled repeats."""
    verdict = request.GET.get("verdict", "")
    try:
        verdicts = verdicts_parse(verdict)
        after = cursor_decode(request.GET.get("cursor"))
    except Invalid:
        verdict, verdicts, after = "", [], None
    found, last = results_after(run, verdicts=verdicts, after=after)
    rows = result_rows(data(result_items(found)))
    keys = {row["case"] for row in rows}
    tallies = case_tallies(run, keys) if run.repeats > 1 else {}
    for row in rows:
        row["url"] = case_url(run.pk, row["case"])
        passes, settled = tallies.get(row["case"], (0, 0))
        row["tally"] = f"{passes}/{settled}" if settled else ""
        row["flaky"] = 0 < passes < settled
    query = f"verdict={verdict}&" if verdict else ""
    return {
        "rows": rows,
        "verdict": verdict,
        "first_page": after is None,
        "next_url": f"?{query}cursor={cursor_encode(last)}" if last else "",
        "first_url": f"?{query}".rstrip("&?") or "?",
        "filters": [
            {
                "value": v,
                "label": label,
                "url": f"?verdict={v}" if v else "?",
                "current": v == verdict,
            }
            for v, label in FILTERS
        ],
    }


def _pair(run: Run) -> list[dict[str, Any]]:
    """The run with its parent or its reruns: each one's summary, shown together."""
    related = [run.parent] if run.parent_id else list(run.children.order_by("pk")[:5])
    return [{"run": other, "summary": run_summary(other)} for other in related if other is not None]


def _live(run: Run, logs: list[dict[str, Any]], results: dict[str, Any]) -> dict[str, Any]:
    """What the page's script needs to follow the run from where the page left off."""
    last_result = last_result_seq(run)
    last_event = run.events.aggregate(last=Max("pk"))["last"] or 0
    return {
        "id": run.pk,
        "after": logs[-1]["seq"] if logs else 0,
        "results_after": last_result,
        "events_after": last_event,
        "terminal": run.is_terminal,
        # New results join the table only on its first page, until the page is full.
        "live_results": results["first_page"],
        "verdicts": verdicts_parse(results["verdict"]),
        "page_size": RESULTS_PAGE,
        "repeats": run.repeats,
        "api": reverse("api-run", args=[run.pk]),
        "logs_api": reverse("api-run-logs", args=[run.pk]),
        "results_api": reverse("api-run-results", args=[run.pk]),
        "case_base": f"/runs/{run.pk}/cases/",
        "socket": f"/ws/runs/{run.pk}/",
    }


@page
@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    user = signed_in(request)
    run = run_get(user=user, run_id=run_id)
    membership = membership_for(user=user, slug=run.workspace.slug)
    reply = RunReply.of(run_overview(run)).data()
    results = _page_of_results(run, request)
    logs = _log_tail(run)
    baseline = run_baseline(run)
    return render(
        request,
        "scorecards/run.html",
        {
            "run": run,
            "reply": reply,
            "results": results,
            "runtime": runtime_label(run),
            "waiting": run_waiting(run),
            "logs": logs,
            "can_cancel": not run.is_terminal and membership.may_cancel(run),
            "can_rerun": run.is_terminal and membership.allows(Role.MEMBER),
            "can_regrade": run.is_terminal and membership.allows(Role.MEMBER),
            "graders": harness_versions(run),
            "related": _pair(run),
            "distribution": score_distribution(run),
            "baseline": baseline,
            "comparable": comparable_runs(run=run),
            "live": _live(run, logs, results),
        },
    )


@page
@require_POST
def run_cancel_view(request: HttpRequest, run_id: int) -> HttpResponse:
    try:
        run = run_cancel(user=signed_in(request), run_id=run_id)
    except Forbidden as exc:
        messages.error(request, str(exc.detail))
    else:
        messages.success(request, f"Run {run.pk} is {run.status}.")
    return redirect("run", run_id=run_id)


@page
@require_POST
def run_rerun_view(request: HttpRequest, run_id: int) -> HttpResponse:
    only = request.POST.get("only", "")
    if only not in RERUN_CHOICES:
        messages.error(request, "Choose which cases to run again: failed or unfinished.")
        return redirect("run", run_id=run_id)
    try:
        child = run_rerun(user=signed_in(request), run_id=run_id, only=only)
    except (Invalid, Forbidden) as exc:
        messages.error(request, error_text(exc))
        return redirect("run", run_id=run_id)
    messages.success(request, f"Run {child.pk} re-runs the {only} cases of run {run_id}.")
    return redirect("run", run_id=child.pk)
