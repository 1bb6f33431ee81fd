"""The search pages: a run's and a workspace's, the box on top, the matching cases below."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from accounts.authentication import signed_in
from core.errors import Invalid
from core.fields import query_int
from scorecards.search.replies import SearchReply
from scorecards.search.selectors import MAX_QUERY_CHARS, PAGE, search_results, search_scope
from scorecards.views.common import error_text, page


def _page(
    request: HttpRequest, *, run_id: int | None = None, slug: str | None = None
) -> HttpResponse:
    query = request.GET.get("q", "")
    context: dict[str, object] = {"q": query, "max_chars": MAX_QUERY_CHARS, "run_id": run_id}
    status = 200
    # An outsider finds no page, with or without a query.
    context["workspace"], _ = search_scope(
        user=signed_in(request), run_id=run_id, workspace_slug=slug
    )
    try:
        number = query_int("page", request.GET.get("page"), default=1, lowest=1, highest=10_000)
        if query:
            found = search_results(
                user=signed_in(request),
                query=query,
                run_id=run_id,
                workspace_slug=slug,
                page=number,
                limit=PAGE,
            )
            context["reply"] = SearchReply.of(found)
    except Invalid as exc:
        context["error"], status = error_text(exc), 400
    return render(request, "search/results.html", context, status=status)


@page
@require_GET
def run_search_page(request: HttpRequest, run_id: int) -> HttpResponse:
    return _page(request, run_id=run_id)


@page
@require_GET
def workspace_search_page(request: HttpRequest, slug: str) -> HttpResponse:
    return _page(request, slug=slug)
