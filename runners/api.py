"""REST API for runners: pair (the token is shown once), list mine, revoke."""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from runnercli.protocol import CAPABILITY_RE
from runners.models import Runner
from runners.replies import paired_runner_reply, runner_items
from runners.services import runner_pair, runner_revoke

MAX_CAPABILITIES = 64

capability_validator = RegexValidator(
    CAPABILITY_RE,
    "A capability is 1-40 characters of a-z, 0-9, '.', '_' or '-', "
    "starting with a letter or digit.",
)


class RunnerPairSerializer(serializers.Serializer):
    # `label` shadows Field.label in the type stubs only; DRF declares fields this way.
    label = serializers.CharField(max_length=100)  # type: ignore[assignment]
    os = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    capabilities = serializers.ListField(
        child=serializers.CharField(max_length=40, validators=[capability_validator]),
        required=False,
        default=list,
        max_length=MAX_CAPABILITIES,
    )
    workspace = serializers.SlugField(max_length=50, required=False, allow_null=True, default=None)

    def validate_workspace(self, slug: str | None) -> Any:
        if slug is None:
            return None
        # A lazy reference: the queue layer does not import scorecards.
        workspace = (
            apps.get_model("scorecards", "Workspace")
            .objects.filter(slug=slug, memberships__user=self.context["user"])
            .first()
        )
        if workspace is None:
            # The same answer whether it does not exist or is not yours.
            raise serializers.ValidationError("No workspace with this slug that you belong to.")
        return workspace


# The reply shapes, for the schema only: the replies are built by runners.replies.
class RunnerItemSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]
    os = serializers.CharField()
    capabilities = serializers.ListField(child=serializers.CharField())
    online = serializers.BooleanField()
    last_seen_at = serializers.DateTimeField(allow_null=True)
    status = serializers.CharField()
    revoked = serializers.BooleanField()


class PairedRunnerSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    label = serializers.CharField()  # type: ignore[assignment]
    os = serializers.CharField()
    capabilities = serializers.ListField(child=serializers.CharField())
    token = serializers.CharField(help_text="Shown once: only its hash is kept.")


class RunnerListView(APIView):
    @extend_schema(responses=RunnerItemSerializer(many=True))
    def get(self, request: Request) -> Response:
        return Response(runner_items(Runner.objects.owned_by(request.user)))

    @extend_schema(request=RunnerPairSerializer, responses={201: PairedRunnerSerializer})
    def post(self, request: Request) -> Response:
        body = RunnerPairSerializer(data=request.data, context={"user": request.user})
        body.is_valid(raise_exception=True)
        paired = runner_pair(owner=request.user, **body.validated_data)
        return Response(
            paired_runner_reply(paired.runner, paired.token), status=status.HTTP_201_CREATED
        )


class RunnerDetailView(APIView):
    @extend_schema(responses={204: None})
    def delete(self, request: Request, runner_id: int) -> Response:
        runner_revoke(owner=request.user, runner_id=runner_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
