"""Comparing two runs: regressions and fixes first, outputs side by side, flaky cases marked;
the baseline defaults to the previous finished run of the same harness and dataset."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounts.authentication import signed_in
from core.errors import Invalid, NotFound
from core.fields import query_int
from scorecards.selectors.compare import output_diffs, run_compare
from scorecards.selectors.runs import runs_latest
from scorecards.selectors.workspaces import membership_for
from scorecards.views.common import error_text, page


@page
@require_GET
def compare(request: HttpRequest, slug: str) -> HttpResponse:
    user = signed_in(request)
    membership = membership_for(user=user, slug=slug)
    comparison, error, status = None, "", 200
    try:
        # Read before any lookup: `int()` would read other scripts' digits.
        a, b = (query_int(name, request.GET.get(name)) for name in ("a", "b"))
        page = query_int("page", request.GET.get("page"), default=1, lowest=1)
    except Invalid:
        a = b = None
        error, status = "Run ids and pages are numbers in ASCII digits.", 400
    if b is not None:
        try:
            comparison = run_compare(user=user, workspace_slug=slug, a=a, b=b, page=page)
        except (Invalid, NotFound) as exc:
            error = error_text(exc)
            status = exc.status
        else:
            output_diffs(comparison)
            a = comparison.a.pk
    runs = runs_latest(user=user, workspace_slug=slug, limit=100)
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
