"""REST API of a case's trace and screens, by case key in the query (a key may hold `/`):
`GET /api/runs/<id>/trace?key=K&after_seq=N&limit=L`, `/screens?key=K`, `/screens/<n>?key=K`
(`n` a frame of the filmstrip, or `live`), and `/running` (the running cases of a run, their
current step and newest frame). `repeat=R` when the run has repeats, `attempt=E` for an
attempt other than the job's current one. Members of the run's workspace only; others 404."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import signed_in
from scorecards.selectors.runs import run_get
from scorecards.traces.replies import RunningCaseItem, RunningCases, ScreensReply, TraceReply
from scorecards.traces.selectors import (
    MAX_TRACE_PAGE,
    CaseAttempt,
    case_attempt,
    filmstrip,
    frame_bytes,
    live_of,
    running_cases,
    trace_page,
)

CASE_PARAMETERS = [
    OpenApiParameter("key", str, required=True, description="The case key."),
    OpenApiParameter("repeat", int, description="Which repeat (0-based), when there are several."),
    OpenApiParameter("attempt", int, description="An attempt's epoch (default: the latest)."),
]


def _case(request: Request, run_id: int) -> CaseAttempt:
    params = request.query_params
    return case_attempt(
        user=signed_in(request),
        run_id=run_id,
        key=params.get("key", ""),
        repeat=params.get("repeat"),
        attempt=params.get("attempt"),
    )


class TraceView(APIView):
    @extend_schema(
        parameters=[
            *CASE_PARAMETERS,
            OpenApiParameter("after_seq", int, description="Events after this seq."),
            OpenApiParameter(
                "limit", int, description=f"Page size (200), at most {MAX_TRACE_PAGE}."
            ),
        ],
        responses=TraceReply,
    )
    def get(self, request: Request, run_id: int) -> Response:
        params = request.query_params
        page = trace_page(
            _case(request, run_id), after_seq=params.get("after_seq"), limit=params.get("limit")
        )
        brief = params.get("brief", "") in ("1", "true")
        return Response(TraceReply.of(page, brief=brief).data())


class ScreensView(APIView):
    @extend_schema(parameters=CASE_PARAMETERS, responses=ScreensReply)
    def get(self, request: Request, run_id: int) -> Response:
        where = _case(request, run_id)
        return Response(ScreensReply.of(where, filmstrip(where), live_of(where)).data())


class FrameView(APIView):
    @extend_schema(
        parameters=CASE_PARAMETERS,
        responses={
            (200, "image/png"): OpenApiTypes.BINARY,
            (200, "image/jpeg"): OpenApiTypes.BINARY,
        },
    )
    def get(self, request: Request, run_id: int, n: str) -> HttpResponse:
        media_type, data = frame_bytes(_case(request, run_id), n)
        response = HttpResponse(data, content_type=media_type)
        response["X-Content-Type-Options"] = "nosniff"
        # A frame of the filmstrip never changes; the live one does with every frame.
        response["Cache-Control"] = "no-store" if n == "live" else "private, max-age=86400"
        return response


class RunningView(APIView):
    @extend_schema(responses=RunningCases)
    def get(self, request: Request, run_id: int) -> Response:
        run = run_get(user=signed_in(request), run_id=run_id)
        items = [RunningCaseItem.of(run.pk, run.repeats, c) for c in running_cases(run)]
        return Response(RunningCases(cases=items).data())
