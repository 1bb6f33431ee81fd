"""REST API for scorecard runs: start, read (summary, events, results), logs, cancel."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.fields import IntegerField, ascii_int
from accounts.replies import data
from accounts.schema import service_errors
from scorecards.replies import LogLines, RunReply
from scorecards.selectors import run_get, run_logs, run_reply
from scorecards.services import MAX_CONCURRENCY, run_cancel, run_start


class RunCreateSerializer(serializers.Serializer):
    harness = serializers.CharField(max_length=100)
    harness_version = IntegerField(min_value=1, required=False, allow_null=True)
    dataset = serializers.CharField(max_length=100)
    dataset_version = IntegerField(min_value=1, required=False, allow_null=True)
    runtime = serializers.CharField(
        max_length=50, help_text="`self:<runner_id>` (one of my runners) or `self:any`."
    )
    concurrency = IntegerField(min_value=1, max_value=MAX_CONCURRENCY, default=1)


class RunCreateView(APIView):
    @extend_schema(request=RunCreateSerializer, responses={201: RunReply})
    @service_errors((429, "Error", "The workspace has used its run quota for this month."))
    def post(self, request: Request, slug: str) -> Response:
        body = RunCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = run_start(user=request.user, workspace_slug=slug, **body.validated_data)
        return Response(run_reply(run).data(), status=status.HTTP_201_CREATED)


class RunDetailView(APIView):
    @extend_schema(responses=RunReply)
    def get(self, request: Request, run_id: int) -> Response:
        return Response(run_reply(run_get(user=request.user, run_id=run_id)).data())


class RunLogsView(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("after", int, description="Return lines after this seq.")],
        responses=LogLines,
    )
    def get(self, request: Request, run_id: int) -> Response:
        after = ascii_int(request.query_params.get("after", "0"))
        if after is None:
            return Response({"after": ["Must be a non-negative integer (ASCII digits)."]}, 400)
        return Response(data(run_logs(user=request.user, run_id=run_id, after=after)))


class RunCancelView(APIView):
    @extend_schema(request=None, responses=RunReply)
    def post(self, request: Request, run_id: int) -> Response:
        return Response(run_reply(run_cancel(user=request.user, run_id=run_id)).data())
