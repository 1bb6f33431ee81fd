"""REST API for workspaces: create, read, update (quota and budget), add members."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from scorecards.models import Membership, Role
from scorecards.replies import workspace_reply
from scorecards.workspaces import member_add, membership_for, workspace_create, workspace_update

# The column limits of PositiveIntegerField and PositiveBigIntegerField.
_MAX_INT = 2**31 - 1
_MAX_BIGINT = 2**63 - 1


class WorkspaceCreateSerializer(serializers.Serializer):
    slug = serializers.SlugField(max_length=50)
    name = serializers.CharField(max_length=200)


class WorkspaceUpdateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200, required=False)
    run_quota = serializers.IntegerField(
        min_value=0,
        max_value=_MAX_INT,
        allow_null=True,
        required=False,
        help_text="Runs per calendar month; null means unlimited.",
    )
    budget_usd = serializers.DecimalField(
        max_digits=12, decimal_places=4, min_value=0, allow_null=True, required=False
    )
    budget_tokens = serializers.IntegerField(
        min_value=0, max_value=_MAX_BIGINT, allow_null=True, required=False
    )


class MemberAddSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Role.choices)


# The reply shapes, for the schema only: the replies are built by scorecards.replies.
class WorkspaceReplySerializer(serializers.Serializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    run_quota = serializers.IntegerField(allow_null=True)
    budget_usd = serializers.FloatField(allow_null=True)
    budget_tokens = serializers.IntegerField(allow_null=True)
    spent_usd = serializers.FloatField()
    spent_tokens = serializers.IntegerField()
    role = serializers.ChoiceField(choices=Role.choices)


class MemberReplySerializer(serializers.Serializer):
    workspace = serializers.CharField()
    username = serializers.CharField()
    role = serializers.ChoiceField(choices=Role.choices)


class WorkspaceListView(APIView):
    @extend_schema(responses=WorkspaceReplySerializer(many=True))
    def get(self, request: Request) -> Response:
        user: Any = request.user  # authenticated, by the default permission
        memberships = Membership.objects.filter(user=user).select_related("workspace")
        return Response(
            [workspace_reply(m.workspace, m.role) for m in memberships.order_by("workspace__slug")]
        )

    @extend_schema(request=WorkspaceCreateSerializer, responses={201: WorkspaceReplySerializer})
    def post(self, request: Request) -> Response:
        body = WorkspaceCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        workspace = workspace_create(user=request.user, **body.validated_data)
        return Response(workspace_reply(workspace, Role.OWNER), status=status.HTTP_201_CREATED)


class WorkspaceDetailView(APIView):
    @extend_schema(responses=WorkspaceReplySerializer)
    def get(self, request: Request, slug: str) -> Response:
        membership = membership_for(user=request.user, slug=slug)
        return Response(workspace_reply(membership.workspace, membership.role))

    @extend_schema(request=WorkspaceUpdateSerializer, responses=WorkspaceReplySerializer)
    def patch(self, request: Request, slug: str) -> Response:
        body = WorkspaceUpdateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        workspace = workspace_update(user=request.user, slug=slug, changes=body.validated_data)
        role = membership_for(user=request.user, slug=slug).role
        return Response(workspace_reply(workspace, role))


class WorkspaceMembersView(APIView):
    @extend_schema(request=MemberAddSerializer, responses={201: MemberReplySerializer})
    def post(self, request: Request, slug: str) -> Response:
        body = MemberAddSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        membership = member_add(user=request.user, slug=slug, **body.validated_data)
        reply = {
            "workspace": membership.workspace.slug,
            "username": membership.user.get_username(),
            "role": membership.role,
        }
        return Response(reply, status=status.HTTP_201_CREATED)
