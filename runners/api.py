"""REST API for runners: pair (the token is shown once), list mine, revoke."""

from __future__ import annotations

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import signed_in
from core.replies import data
from core.serializers import StrictSerializer
from runnercli.protocol import CAPABILITY_RE, MAX_CAPABILITIES, MAX_CAPABILITY_CHARS
from runners.models import PairingMethod
from runners.replies import PairedRunner, RunnerItems, runner_items
from runners.roster import runners_of
from runners.services import runner_pair, runner_revoke

capability_validator = RegexValidator(
    CAPABILITY_RE,
    "A capability is 1-40 characters of a-z, 0-9, '.', '_' or '-', "
    "starting with a letter or digit, or repo:OWNER/NAME for a mapped repo.",
)


class RunnerPairSerializer(StrictSerializer):
    # `label` shadows Field.label in the type stubs only; DRF declares fields this way.
    label = serializers.CharField(max_length=100)  # type: ignore[assignment]
    os = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    capabilities = serializers.ListField(
        child=serializers.CharField(
            max_length=MAX_CAPABILITY_CHARS, validators=[capability_validator]
        ),
        required=False,
        default=list,
        max_length=MAX_CAPABILITIES,
    )
    workspace = serializers.SlugField(
        max_length=50,
        required=False,
        allow_null=True,
        default=None,
        source="workspace_slug",
        help_text="The slug of the workspace it is paired from (one you belong to).",
    )


class RunnerListView(APIView):
    @extend_schema(responses=RunnerItems)
    def get(self, request: Request) -> Response:
        return Response(data(runner_items(runners_of(signed_in(request)))))

    @extend_schema(request=RunnerPairSerializer, responses={201: PairedRunner})
    def post(self, request: Request) -> Response:
        body = RunnerPairSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        paired = runner_pair(owner=signed_in(request), via=PairingMethod.API, **body.validated_data)
        reply = PairedRunner.of(paired.runner, paired.token)
        return Response(reply.data(), status=status.HTTP_201_CREATED)


class RunnerDetailView(APIView):
    @extend_schema(responses={204: None})
    def delete(self, request: Request, runner_id: int) -> Response:
        runner_revoke(owner=signed_in(request), runner_id=runner_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
