"""DRF authentication: `Authorization: Bearer evk_…`. Runner tokens are for /mcp only."""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions
from rest_framework.request import Request

from accounts import tokens
from accounts.services import api_key_authenticate


class BearerKeyAuthentication(authentication.BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        header = authentication.get_authorization_header(request).decode(errors="replace")
        if not header:
            return None
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        secret = secret.strip()
        if not secret:
            raise exceptions.AuthenticationFailed("Empty bearer token.")
        if secret.startswith(tokens.RUNNER_TOKEN_PREFIX):
            raise exceptions.AuthenticationFailed(
                "Runner tokens are accepted only by /mcp; use a personal API key (evk_…)."
            )
        api_key = api_key_authenticate(secret)
        if api_key is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked API key.")
        return api_key.user, api_key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'
