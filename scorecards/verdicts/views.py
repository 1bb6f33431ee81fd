"""Regrading a run from its page, and a person's verdict from the case page."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from accounts.authentication import signed_in
from core.errors import Conflict, Forbidden, Invalid
from core.fields import query_int
from scorecards.links import case_url
from scorecards.verdicts.regrades import run_regrade
from scorecards.verdicts.services import verdict_set, verdict_withdraw
from scorecards.views.common import error_text, page


@page
@require_POST
def run_regrade_view(request: HttpRequest, run_id: int) -> HttpResponse:
    try:
        version = query_int("harness_version", request.POST.get("harness_version"))
        done = run_regrade(user=signed_in(request), run_id=run_id, harness_version=version)
    except (Invalid, Forbidden, Conflict) as exc:
        messages.error(request, error_text(exc))
    else:
        messages.success(
            request,
            f"Regraded with {done.grader}: {done.regraded} results, {done.changed} changed.",
        )
    return redirect("run", run_id=run_id)


@page
@require_POST
def case_verdict_view(request: HttpRequest, run_id: int) -> HttpResponse:
    key, repeat = request.POST.get("key", ""), request.POST.get("repeat") or None
    user = signed_in(request)
    try:
        if request.POST.get("action") == "withdraw":
            verdict_withdraw(user=user, run_id=run_id, key=key, repeat=repeat)
            messages.success(request, "Your verdict was withdrawn: the grader's counts again.")
        else:
            verdict, note = request.POST.get("verdict", ""), request.POST.get("note", "")
            verdict_set(
                user=user, run_id=run_id, key=key, verdict=verdict, note=note, repeat=repeat
            )
            messages.success(request, f"Verdict set: {verdict}.")
    except (Invalid, Forbidden, Conflict) as exc:
        messages.error(request, error_text(exc))
    return redirect(case_url(run_id, key))
