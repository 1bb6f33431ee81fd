"""Who a request is signed in as: DRF authentication by `Authorization: Bearer evk_…` (runner
tokens are for /mcp only), and the user behind a page or API request that was let through."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from accounts import tokens
from accounts.services import api_key_authenticate

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def signed_in(request: HttpRequest | Request) -> User:
    """The user the request is signed in as, for a view its authentication let through (a
    page behind its login, an API view behind `IsAuthenticated`); anyone else is refused."""
    user = request.user
    if user is not None and user.is_authenticated:
        return user
    raise PermissionDenied("Sign in first.")


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
