"""REST API of search: `GET /api/runs/<id>/search?q=` and `GET /api/workspaces/<slug>/search?q=`."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import signed_in
from core.fields import query_int
from scorecards.search.replies import SearchReply
from scorecards.search.selectors import MAX_PAGE, MAX_QUERY_CHARS, PAGE, search_results

PARAMETERS = [
    OpenApiParameter(
        "q", str, required=True, description=f"Literal text, at most {MAX_QUERY_CHARS} characters."
    ),
    OpenApiParameter("page", int, description="From 1."),
    OpenApiParameter("limit", int, description=f"Cases a page, 1 to {MAX_PAGE} (default {PAGE})."),
]


def _search(request: Request, **scope: object) -> Response:
    params = request.query_params
    found = search_results(
        user=signed_in(request),
        query=params.get("q"),
        page=query_int("page", params.get("page"), default=1, lowest=1, highest=10_000),
        limit=query_int("limit", params.get("limit"), default=PAGE, lowest=1, highest=MAX_PAGE),
        **scope,  # type: ignore[arg-type]
    )
    return Response(SearchReply.of(found).data())


class RunSearchView(APIView):
    @extend_schema(parameters=PARAMETERS, responses=SearchReply)
    def get(self, request: Request, run_id: int) -> Response:
        return _search(request, run_id=run_id)


class WorkspaceSearchView(APIView):
    @extend_schema(parameters=PARAMETERS, responses=SearchReply)
    def get(self, request: Request, slug: str) -> Response:
        return _search(request, workspace_slug=slug)
