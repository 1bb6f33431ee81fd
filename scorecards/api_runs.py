"""REST API for scorecard runs: start, read (summary, events, results), logs, cancel."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scorecards.run_replies import run_reply
from scorecards.services import MAX_CONCURRENCY, run_cancel, run_get, run_logs, run_start


class RunCreateSerializer(serializers.Serializer):
    harness = serializers.CharField(max_length=100)
    harness_version = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    dataset = serializers.CharField(max_length=100)
    dataset_version = serializers.IntegerField(min_value=1, required=False, allow_null=True)
    runtime = serializers.CharField(
        max_length=50, help_text="`self:<runner_id>` (one of my runners) or `self:any`."
    )
    concurrency = serializers.IntegerField(min_value=1, max_value=MAX_CONCURRENCY, default=1)


_RunReply = inline_serializer(
    "Run",
    {
        "id": serializers.IntegerField(),
        "workspace": serializers.CharField(),
        "status": serializers.CharField(),
        "runtime": serializers.CharField(),
        "submitted_by": serializers.CharField(),
        "created_at": serializers.DateTimeField(),
        "finished_at": serializers.DateTimeField(allow_null=True),
        "summary": serializers.DictField(),
        "events": serializers.ListField(child=serializers.DictField()),
        "results": serializers.ListField(child=serializers.DictField()),
    },
)

_LogLine = inline_serializer(
    "RunLogLine",
    many=True,
    fields={
        "seq": serializers.IntegerField(),
        "at": serializers.DateTimeField(),
        "case": serializers.CharField(),
        "line": serializers.CharField(),
    },
)


class RunCreateView(APIView):
    @extend_schema(request=RunCreateSerializer, responses={201: _RunReply})
    def post(self, request: Request, slug: str) -> Response:
        body = RunCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = run_start(user=request.user, workspace_slug=slug, **body.validated_data)
        return Response(run_reply(run), status=status.HTTP_201_CREATED)


class RunDetailView(APIView):
    @extend_schema(responses=_RunReply)
    def get(self, request: Request, run_id: int) -> Response:
        return Response(run_reply(run_get(user=request.user, run_id=run_id)))


class RunLogsView(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("after", int, description="Return lines after this seq.")],
        responses=_LogLine,
    )
    def get(self, request: Request, run_id: int) -> Response:
        after = request.query_params.get("after", "0")
        if not after.isdigit():
            return Response({"after": ["Must be a non-negative integer."]}, status=400)
        return Response(run_logs(user=request.user, run_id=run_id, after=int(after)))


class RunCancelView(APIView):
    @extend_schema(request=None, responses=_RunReply)
    def post(self, request: Request, run_id: int) -> Response:
        return Response(run_reply(run_cancel(user=request.user, run_id=run_id)))
