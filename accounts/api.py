"""REST API for personal API keys: list, create (the key is shown once), revoke."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import signed_in
from accounts.models import ApiKey
from accounts.replies import ApiKeyItem, ApiKeyItems, IssuedKey
from accounts.services import api_key_create, api_key_revoke
from core.errors import NotFound
from core.replies import data
from core.serializers import StrictSerializer


class BearerKeyScheme(OpenApiAuthenticationExtension):
    """Describe `Authorization: Bearer evk_…` in the OpenAPI schema."""

    target_class = "accounts.authentication.BearerKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API key (`evk_…`). Runner tokens are refused here.",
        }


class ApiKeyCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")


class ApiKeyListView(APIView):
    @extend_schema(responses=ApiKeyItems)
    def get(self, request: Request) -> Response:
        keys = ApiKey.objects.owned_by(signed_in(request)).active()
        return Response(data([ApiKeyItem.of(key) for key in keys]))

    @extend_schema(request=ApiKeyCreateSerializer, responses={201: IssuedKey})
    def post(self, request: Request) -> Response:
        body = ApiKeyCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        issued = api_key_create(user=signed_in(request), name=body.validated_data["name"])
        reply = IssuedKey.of(issued.api_key, issued.key)
        return Response(reply.data(), status=status.HTTP_201_CREATED)


class ApiKeyDetailView(APIView):
    @extend_schema(responses={204: None})
    def delete(self, request: Request, key_id: int) -> Response:
        if not api_key_revoke(user=signed_in(request), key_id=key_id):
            raise NotFound("API key not found.")
        return Response(status=status.HTTP_204_NO_CONTENT)
