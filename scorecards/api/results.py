"""REST API for a run's results: cursor-paged in settlement order, and the streamed exports."""

from __future__ import annotations

from typing import Any

from django.core.handlers.asgi import ASGIRequest
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import signed_in
from core.replies import data
from scorecards.api.paging import SettlementOrder
from scorecards.exports import export_response
from scorecards.replies.results import ResultItemPage, result_items
from scorecards.selectors.results import MAX_RESULTS_PAGE, results_of, verdicts_parse, with_previews
from scorecards.selectors.runs import run_get

RESULT_PARAMETERS = [
    OpenApiParameter(
        "verdict", str, description="pass, fail, error, or a list of them: `fail,error`."
    ),
    OpenApiParameter("cursor", str, description="From `next` (or MCP's `next_cursor`)."),
    OpenApiParameter("limit", int, description=f"Page size, at most {MAX_RESULTS_PAGE}."),
]


class RunResultsView(APIView):
    @extend_schema(parameters=RESULT_PARAMETERS, responses=ResultItemPage)
    def get(self, request: Request, run_id: int) -> Response:
        run = run_get(user=signed_in(request), run_id=run_id)
        verdicts = verdicts_parse(request.query_params.get("verdict"))
        paginator = SettlementOrder()
        page = paginator.paginate_queryset(results_of(run, verdicts), request, self)
        rows = with_previews([row.pk for row in page or []])
        return paginator.get_paginated_response(data(result_items(rows)))


class RunExportView(APIView):
    """`results.csv` / `results.jsonl`: every result, streamed in settlement order."""

    fmt = "csv"

    @extend_schema(responses={(200, "text/csv"): OpenApiTypes.STR})
    def get(self, request: Request, run_id: int) -> Any:
        run = run_get(user=signed_in(request), run_id=run_id)
        # Under ASGI a stream must be an async iterator, or Django reads it whole first.
        asynchronous = isinstance(request._request, ASGIRequest)
        return export_response(run, self.fmt, asynchronous=asynchronous)


class RunJsonlExportView(RunExportView):
    fmt = "jsonl"

    @extend_schema(responses={(200, "application/x-ndjson"): OpenApiTypes.STR})
    def get(self, request: Request, run_id: int) -> Any:
        return super().get(request, run_id)
