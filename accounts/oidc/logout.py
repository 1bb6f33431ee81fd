"""Logout at the provider (OpenID Connect RP-Initiated Logout), when it advertises it."""

from __future__ import annotations

import logging
from urllib.parse import urlencode

import requests
from allauth.socialaccount.adapter import get_adapter
from allauth.socialaccount.models import SocialApp
from django.conf import settings
from django.http import HttpRequest
from django.urls import reverse

log = logging.getLogger(__name__)


def provider_logout_url(request: HttpRequest, id_token: str) -> str | None:
    """Where to send a member who signed in through the provider so that its session ends
    too: its `end_session_endpoint`, back to the login page after. None when it advertises
    none, or cannot be asked (the local session is ended either way)."""
    try:
        provider = get_adapter(request).get_provider(request, settings.OIDC_PROVIDER_ID)
        discovery = provider.get_oauth2_adapter(request).openid_config
    except (SocialApp.DoesNotExist, requests.RequestException, ValueError) as exc:
        log.warning("logout at the OpenID provider skipped: %s", exc)
        return None
    endpoint = discovery.get("end_session_endpoint")
    if not endpoint:
        return None
    query = urlencode(
        {
            "id_token_hint": id_token,
            "client_id": provider.app.client_id,
            "post_logout_redirect_uri": request.build_absolute_uri(reverse("login")),
        }
    )
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"
