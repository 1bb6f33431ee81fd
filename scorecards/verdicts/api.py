"""REST API for verdicts beyond the settled ones: regrade a run's stored outputs, and a
person's verdict on one case (set with PUT, withdrawn with DELETE)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import signed_in
from core.fields import IntegerField
from core.schema import service_errors
from core.serializers import StrictSerializer
from scorecards.models import CaseResult
from scorecards.selectors.summary import run_summary
from scorecards.verdicts.regrades import run_regrade
from scorecards.verdicts.replies import RegradeReply, VerdictReply
from scorecards.verdicts.services import (
    MAX_NOTE_CHARS,
    PERSON_VERDICTS,
    verdict_set,
    verdict_withdraw,
)


class RegradeSerializer(StrictSerializer):
    harness_version = IntegerField(
        min_value=1, required=False, allow_null=True, help_text="Default: the current grader's."
    )
    harness = serializers.CharField(
        max_length=100, required=False, help_text="The run's harness (any other is refused)."
    )


class VerdictSerializer(StrictSerializer):
    verdict = serializers.ChoiceField(choices=[str(v) for v in PERSON_VERDICTS])
    note = serializers.CharField(max_length=MAX_NOTE_CHARS, required=False, allow_blank=True)
    repeat = IntegerField(min_value=0, required=False, allow_null=True)


KEY = OpenApiParameter("key", str, required=True, description="The case key.")
REPEAT = OpenApiParameter("repeat", int, description="Which repeat, when the run has several.")


def _reply(result: CaseResult, key: str) -> Response:
    return Response(VerdictReply.of(result, key, run_summary(result.run)).data())


class RunRegradeView(APIView):
    @extend_schema(request=RegradeSerializer, responses=RegradeReply)
    @service_errors((409, "Error", "The run has not ended yet."))
    def post(self, request: Request, run_id: int) -> Response:
        body = RegradeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        done = run_regrade(user=signed_in(request), run_id=run_id, **body.validated_data)
        return Response(RegradeReply.of(done).data())


class RunVerdictView(APIView):
    @extend_schema(parameters=[KEY], request=VerdictSerializer, responses=VerdictReply)
    @service_errors((409, "Error", "The case has no result yet."))
    def put(self, request: Request, run_id: int) -> Response:
        body = VerdictSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        key = request.query_params.get("key", "")
        result = verdict_set(user=signed_in(request), run_id=run_id, key=key, **body.validated_data)
        return _reply(result, key)

    @extend_schema(parameters=[KEY, REPEAT], responses=VerdictReply)
    @service_errors((409, "Error", "The case has no result yet."))
    def delete(self, request: Request, run_id: int) -> Response:
        key, repeat = request.query_params.get("key", ""), request.query_params.get("repeat")
        result = verdict_withdraw(user=signed_in(request), run_id=run_id, key=key, repeat=repeat)
        return _reply(result, key)
