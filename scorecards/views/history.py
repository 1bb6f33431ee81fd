"""A harness's history: its pass rate per dataset over time, charted, each point a run."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounts.authentication import signed_in
from scorecards.replies.history import HarnessHistoryReply
from scorecards.selectors.history import harness_runs
from scorecards.selectors.workspaces import membership_for
from scorecards.views.common import page


@page
@require_GET
def harness_history(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    user = signed_in(request)
    membership = membership_for(user=user, slug=slug)
    runs = harness_runs(user=user, workspace_slug=slug, name=name)
    history = HarnessHistoryReply.of(workspace=membership.workspace.slug, harness=name, runs=runs)
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
