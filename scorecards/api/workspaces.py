"""REST API for workspaces: create, read, update (quota and budget), add members."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import signed_in
from core.fields import IntegerField
from core.replies import data
from core.schema import service_errors
from core.serializers import StrictSerializer
from scorecards.models import Role
from scorecards.replies.workspaces import MemberReply, WorkspaceReplies, WorkspaceReply
from scorecards.selectors.workspaces import membership_for, memberships_of
from scorecards.services import member_add, workspace_create, workspace_update

# The column limits of PositiveIntegerField and PositiveBigIntegerField.
_MAX_INT = 2**31 - 1
_MAX_BIGINT = 2**63 - 1


class WorkspaceCreateSerializer(StrictSerializer):
    slug = serializers.SlugField(max_length=50)
    name = serializers.CharField(max_length=200)


class WorkspaceUpdateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200, required=False)
    run_quota = IntegerField(
        min_value=0,
        max_value=_MAX_INT,
        allow_null=True,
        required=False,
        help_text="Runs per calendar month; null means unlimited.",
    )
    budget_usd = serializers.DecimalField(
        max_digits=12, decimal_places=4, min_value=0, allow_null=True, required=False
    )
    budget_tokens = IntegerField(
        min_value=0, max_value=_MAX_BIGINT, allow_null=True, required=False
    )


class MemberAddSerializer(StrictSerializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Role.choices)


class WorkspaceListView(APIView):
    @extend_schema(responses=WorkspaceReplies)
    def get(self, request: Request) -> Response:
        memberships = memberships_of(signed_in(request))
        return Response(data([WorkspaceReply.of(m.workspace, m.role) for m in memberships]))

    @extend_schema(request=WorkspaceCreateSerializer, responses={201: WorkspaceReply})
    @service_errors((409, "ValidationError", "A workspace with this slug already exists."))
    def post(self, request: Request) -> Response:
        body = WorkspaceCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        workspace = workspace_create(user=signed_in(request), **body.validated_data)
        reply = WorkspaceReply.of(workspace, Role.OWNER)
        return Response(reply.data(), status=status.HTTP_201_CREATED)


class WorkspaceDetailView(APIView):
    @extend_schema(responses=WorkspaceReply)
    def get(self, request: Request, slug: str) -> Response:
        membership = membership_for(user=signed_in(request), slug=slug)
        return Response(WorkspaceReply.of(membership.workspace, membership.role).data())

    @extend_schema(request=WorkspaceUpdateSerializer, responses=WorkspaceReply)
    def patch(self, request: Request, slug: str) -> Response:
        user = signed_in(request)
        body = WorkspaceUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        workspace = workspace_update(user=user, slug=slug, changes=body.validated_data)
        role = membership_for(user=user, slug=slug).role
        return Response(WorkspaceReply.of(workspace, role).data())


class WorkspaceMembersView(APIView):
    @extend_schema(request=MemberAddSerializer, responses={201: MemberReply})
    def post(self, request: Request, slug: str) -> Response:
        body = MemberAddSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        membership = member_add(user=signed_in(request), slug=slug, **body.validated_data)
        return Response(MemberReply.of(membership).data(), status=status.HTTP_201_CREATED)
