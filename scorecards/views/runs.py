"""The run page (live), canceling a run, and comparing two runs."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from accounts.errors import Invalid, NotFound, PermissionDenied, ServiceError
from accounts.fields import ascii_int
from accounts.replies import data
from scorecards import selectors
from scorecards.services import run_cancel
from scorecards.views.common import page, result_rows

INITIAL_LOG_LINES = 1000


@page
@require_GET
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = selectors.run_get(user=request.user, run_id=run_id)
    membership = selectors.membership_for(user=request.user, slug=run.workspace.slug)
    reply = selectors.run_reply(run).data()
    reply["results"] = result_rows(reply["results"])
    logs = data(selectors.run_logs(user=request.user, run_id=run_id, limit=INITIAL_LOG_LINES))
    return render(
        request,
        "scorecards/run.html",
        {
            "run": run,
            "reply": reply,
            "runtime": selectors.runtime_label(run),
            "waiting": selectors.run_waiting(run),
            "logs": logs,
            "can_cancel": not run.is_terminal and membership.may_cancel(run),
            "comparable": selectors.comparable_runs(run=run),
            "live": {
                "id": run.pk,
                "after": logs[-1]["seq"] if logs else 0,
                "terminal": run.is_terminal,
                "api": reverse("api-run", args=[run.pk]),
                "logs_api": reverse("api-run-logs", args=[run.pk]),
                "socket": f"/ws/runs/{run.pk}/",
            },
        },
    )


@page
@require_POST
def run_cancel_view(request: HttpRequest, run_id: int) -> HttpResponse:
    try:
        run = run_cancel(user=request.user, run_id=run_id)
    except PermissionDenied as exc:
        messages.error(request, str(exc.detail))
    else:
        messages.success(request, f"Run {run.pk} is {run.status}.")
    return redirect("run", run_id=run_id)


# ---------------------------------------------------------------- compare


def _run_id(value: str | None) -> int | None:
    return ascii_int(value) if value else None


def _error_text(exc: ServiceError) -> str:
    if isinstance(exc.detail, dict):
        return "; ".join(str(r) for reasons in exc.detail.values() for r in reasons)
    return str(exc.detail)


@page
@require_GET
def compare(request: HttpRequest, slug: str) -> HttpResponse:
    membership = selectors.membership_for(user=request.user, slug=slug)
    a, b = _run_id(request.GET.get("a")), _run_id(request.GET.get("b"))
    comparison, error, status = None, "", 200
    given = [request.GET.get(name) for name in ("a", "b")]
    if any(value and ascii_int(value) is None for value in given):
        # Checked before any lookup: `int()` would read other scripts' digits.
        error, status = "Run ids are numbers in ASCII digits.", 400
    elif a is not None and b is not None:
        try:
            comparison = selectors.run_compare(user=request.user, workspace_slug=slug, a=a, b=b)
        except (Invalid, NotFound) as exc:
            error = _error_text(exc)
            status = exc.status
    runs = selectors.run_list(user=request.user, workspace_slug=slug, limit=100)
    return render(
        request,
        "scorecards/compare.html",
        {
            "workspace": membership.workspace,
            "runs": runs,
            "a": a,
            "b": b,
            "comparison": comparison,
            "error": error,
        },
        status=status,
    )
