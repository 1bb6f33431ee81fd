"""REST API for scorecard runs: start and list, read (summary, newest events, first results),
logs, cancel, rerun, compare."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import signed_in
from core.fields import IntegerField, query_int
from core.replies import data
from core.schema import service_errors
from core.serializers import StrictSerializer
from scorecards.api.paging import NewestFirst
from scorecards.models import Run, RunStatus
from scorecards.replies.compare import CompareReply
from scorecards.replies.runs import LogLine, LogLines, RunItem, RunItemPage, RunReply
from scorecards.selectors.compare import COMPARE_PAGE, run_compare
from scorecards.selectors.results import run_overview
from scorecards.selectors.runs import run_get, run_logs, runs_of
from scorecards.services import (
    MAX_BUDGET_USD,
    MAX_CONCURRENCY,
    MAX_REPEATS,
    MIN_BUDGET_USD,
    RERUN_CHOICES,
    run_cancel,
    run_rerun,
    run_start,
)


class RunCreateSerializer(StrictSerializer):
    harness = serializers.CharField(max_length=100)
    harness_version = IntegerField(min_value=1, required=False, allow_null=True)
    dataset = serializers.CharField(max_length=100)
    dataset_version = IntegerField(min_value=1, required=False, allow_null=True)
    runtime = serializers.CharField(
        max_length=50, help_text="`self:<runner_id>` (one of my runners) or `self:any`."
    )
    concurrency = IntegerField(min_value=1, max_value=MAX_CONCURRENCY, default=1)
    repeats = IntegerField(
        min_value=1, max_value=MAX_REPEATS, default=1, help_text="Runs of each case."
    )
    metadata = serializers.DictField(
        required=False,
        help_text='At most 4 KiB of JSON, e.g. {"git_sha": "…", "branch": "main", "ci_url": "…"}.',
    )
    max_cost_usd = serializers.DecimalField(
        max_digits=12,
        decimal_places=4,
        min_value=MIN_BUDGET_USD,
        max_value=MAX_BUDGET_USD,
        required=False,
        allow_null=True,
        help_text="The run's budget (USD): once its cases and judges reported that much, the "
        "cases not started are skipped.",
    )


class RunRerunSerializer(StrictSerializer):
    only = serializers.ChoiceField(choices=RERUN_CHOICES)
    runtime = serializers.CharField(
        max_length=50,
        required=False,
        help_text="Default: the original's when you started it, else `self:any`.",
    )


class RunListQuery(serializers.Serializer):
    harness = serializers.CharField(max_length=100, required=False)
    dataset = serializers.CharField(max_length=100, required=False)
    status = serializers.ChoiceField(choices=RunStatus.choices, required=False)


def _reply(run: Run, request: Request) -> RunReply:
    """The run reply, its next page of results under this server's address."""
    base = request.build_absolute_uri("/").rstrip("/")
    return RunReply.of(run_overview(run), base_url=base)


class RunCreateView(APIView):
    @extend_schema(
        parameters=[RunListQuery, OpenApiParameter("cursor", str), OpenApiParameter("limit", int)],
        responses=RunItemPage,
    )
    def get(self, request: Request, slug: str) -> Response:
        query = RunListQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        runs = runs_of(user=signed_in(request), workspace_slug=slug, **query.validated_data)
        paginator = NewestFirst()
        page = paginator.paginate_queryset(runs, request, self) or []
        return paginator.get_paginated_response(data([RunItem.of(r) for r in page]))

    @extend_schema(request=RunCreateSerializer, responses={201: RunReply})
    @service_errors((429, "Error", "The workspace has used its run quota for this month."))
    def post(self, request: Request, slug: str) -> Response:
        body = RunCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = run_start(user=signed_in(request), workspace_slug=slug, **body.validated_data)
        return Response(_reply(run, request).data(), status=status.HTTP_201_CREATED)


class RunDetailView(APIView):
    @extend_schema(responses=RunReply)
    def get(self, request: Request, run_id: int) -> Response:
        run = run_get(user=signed_in(request), run_id=run_id)
        return Response(_reply(run, request).data())


class RunLogsView(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("after", int, description="Return lines after this seq.")],
        responses=LogLines,
    )
    def get(self, request: Request, run_id: int) -> Response:
        after = query_int("after", request.query_params.get("after"), default=0)
        lines = run_logs(user=signed_in(request), run_id=run_id, after=after)
        return Response(data([LogLine.of(line) for line in lines]))


class RunCancelView(APIView):
    @extend_schema(request=None, responses=RunReply)
    def post(self, request: Request, run_id: int) -> Response:
        run = run_cancel(user=signed_in(request), run_id=run_id)
        return Response(_reply(run, request).data())


class RunRerunView(APIView):
    @extend_schema(request=RunRerunSerializer, responses={201: RunReply})
    @service_errors((429, "Error", "The workspace has used its run quota for this month."))
    def post(self, request: Request, run_id: int) -> Response:
        body = RunRerunSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        run = run_rerun(user=signed_in(request), run_id=run_id, **body.validated_data)
        return Response(_reply(run, request).data(), status=status.HTTP_201_CREATED)


class RunCompareView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "baseline",
                str,
                description="The run to compare with, or `previous` (default): the latest "
                "earlier finished run of the same harness over the same dataset.",
            ),
            OpenApiParameter(
                "page",
                int,
                description="Which page of cases to list (from 1, regressions first; "
                f"{COMPARE_PAGE} a page): the reply's `next_page`.",
            ),
        ],
        responses=CompareReply,
    )
    def get(self, request: Request, run_id: int) -> Response:
        baseline = request.query_params.get("baseline", "previous")
        a = None if baseline == "previous" else query_int("baseline", baseline)
        page = query_int("page", request.query_params.get("page"), default=1, lowest=1)
        comparison = run_compare(user=signed_in(request), b=run_id, a=a, page=page)
        return Response(CompareReply.of(comparison).data())
