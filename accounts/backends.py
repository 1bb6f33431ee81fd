"""The authentication backend in force when password sign-in is closed."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import ModelBackend
from django.http import HttpRequest


class PasswordClosedBackend(ModelBackend):
    """Django's own backend for sessions and permissions, refusing every password.

    With `EVERDICT_PASSWORD_LOGIN=0` this is the only backend: whatever asks Django to
    check a password (the login page, the admin's login, a management script) is refused,
    while a member signed in through the OpenID provider keeps their session and their
    permissions.
    """

    def authenticate(self, request: HttpRequest | None, *args: Any, **kwargs: Any) -> None:
        return None
