"""The review queue's page: one result at a time, walked with the keyboard (j/k next and
previous, p pass, f fail, c confirm, n note, o open its case page with the trace)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from accounts.authentication import signed_in
from core.errors import Conflict, Invalid
from core.fields import query_int
from scorecards.review.replies import QueueReply, ReviewItem
from scorecards.review.selectors import people_agreement, review_queue
from scorecards.review.services import review_act
from scorecards.views.common import error_text, page


@page
@require_GET
def review_page(request: HttpRequest, slug: str) -> HttpResponse:
    user = signed_in(request)
    try:
        run = query_int("run", request.GET.get("run"))
    except Invalid:
        return HttpResponse("A run id is a number in ASCII digits.", status=400)
    harness = request.GET.get("harness") or None
    queue = review_queue(user=user, workspace_slug=slug, run_id=run, harness=harness)
    agreement = people_agreement(workspace=queue.workspace, harness=harness)
    reply = QueueReply.of(queue, agreement)
    return render(
        request,
        "review/queue.html",
        {"workspace": queue.workspace, "reply": reply, "run": run, "harness": harness or ""},
    )


@page
@require_POST
def review_act_view(request: HttpRequest, slug: str, result_id: int) -> HttpResponse:
    """The page's keys post here (JSON back); without script, the form (back to the page)."""
    wants_json = "application/json" in request.headers.get("Accept", "")
    try:
        review = review_act(
            user=signed_in(request),
            result_id=result_id,
            action=request.POST.get("action", ""),
            note=request.POST.get("note", ""),
        )
    except (Invalid, Conflict) as exc:
        if wants_json:
            return JsonResponse({"error": error_text(exc)}, status=exc.status)
        return HttpResponse(error_text(exc), status=exc.status)
    if wants_json:
        return JsonResponse(ReviewItem.of(review).data(), status=201)
    return redirect(request.POST.get("next") or f"/w/{slug}/review")
