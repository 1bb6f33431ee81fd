"""A harness's history: its pass rate per dataset over time, charted, each point a run."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from scorecards import selectors
from scorecards.views.common import page


@page
@require_GET
def harness_history(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    membership = selectors.membership_for(user=request.user, slug=slug)
    history = selectors.harness_history(user=request.user, workspace_slug=slug, name=name)
    return render(
        request,
        "scorecards/harness_history.html",
        {
            "workspace": membership.workspace,
            "history": history,
            "chart": history.data(),
            "points": sum(len(s.points) for s in history.series),
        },
    )
