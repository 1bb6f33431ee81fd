"""`GET /api/runs/<id>/cases/<key>` (and `?key=K` for the keys a path cannot hold): one case of
a run, whole."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import signed_in
from scorecards.cases.replies import CaseReply
from scorecards.cases.selectors import case_detail


class CaseDetailView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("key", str, description="Only with the `cases` path: the case key.")
        ],
        responses=CaseReply,
    )
    def get(self, request: Request, run_id: int, key: str | None = None) -> Response:
        key = key if key is not None else request.query_params.get("key", "")
        detail = case_detail(user=signed_in(request), run_id=run_id, key=key)
        return Response(CaseReply.of(detail).data())
