"""allauth's OpenID Connect provider, completed: a nonce with every sign-in, the ID token
verified in full (accounts/oidc/idtoken.py), and the username taken from a chosen claim.

Registered through allauth's `provider_class` setting (SOCIALACCOUNT_PROVIDERS in settings.py),
served by the routes in accounts/urls.py. allauth still discovers the endpoints, builds the
authorization request (state, PKCE), exchanges the code and fetches UserInfo.
"""

from __future__ import annotations

import secrets
from typing import Any

from allauth.socialaccount.models import SocialApp, SocialLogin, SocialToken
from allauth.socialaccount.providers.oauth2.client import OAuth2Error
from allauth.socialaccount.providers.oauth2.views import OAuth2CallbackView, OAuth2LoginView
from allauth.socialaccount.providers.openid_connect.provider import (
    OpenIDConnectProvider,
    _pick_data,
)
from allauth.socialaccount.providers.openid_connect.views import OpenIDConnectOAuth2Adapter
from django.http import Http404, HttpRequest, HttpResponse

from accounts.oidc.idtoken import IdTokenError, verify_id_token


class EverdictOIDCAdapter(OpenIDConnectOAuth2Adapter):
    """Verifies what the token endpoint answered before anyone is signed in."""

    # The state stashed with the authorization request (its nonce), set by the callback view;
    # allauth makes the same dict the sign-in's `state` once this adapter is done.
    stashed_state: dict[str, Any] | None = None

    def complete_login(
        self, request: HttpRequest, app: SocialApp, token: SocialToken, **kwargs: Any
    ) -> SocialLogin:
        raw = kwargs["response"].get("id_token")
        if not raw:
            raise OAuth2Error("the provider answered without an ID token")
        state = self.stashed_state or {}
        try:
            claims = verify_id_token(
                raw, discovery=self.openid_config, client_id=app.client_id, nonce=state.get("nonce")
            )
        except IdTokenError as exc:
            raise OAuth2Error(str(exc)) from exc
        data: dict[str, Any] = {"id_token": claims}
        if app.settings.get("fetch_userinfo", True):
            userinfo = self._fetch_user_info(token.token)
            # OpenID Connect Core §5.3.2: UserInfo about anyone else must not be used.
            if userinfo.get("sub") != claims["sub"]:
                raise OAuth2Error("UserInfo names another subject than the ID token")
            data["userinfo"] = userinfo
        # Kept for logout at the provider (`id_token_hint`); see adapters.AccountAdapter.
        state["id_token"] = raw
        return self.get_provider().sociallogin_from_response(request, data)


class EverdictOIDCProvider(OpenIDConnectProvider):
    oauth2_adapter_class = EverdictOIDCAdapter

    def redirect(
        self,
        request: HttpRequest,
        process: Any,
        next_url: str | None = None,
        data: Any = None,
        **kwargs: Any,
    ) -> HttpResponse:
        """allauth's authorization request, with a fresh nonce sent and kept in its state."""
        nonce = secrets.token_urlsafe(32)
        auth_params = {
            **(kwargs.pop("auth_params", None) or self.get_auth_params()),
            "nonce": nonce,
        }
        return super().redirect(
            request, process, next_url, data, auth_params=auth_params, nonce=nonce, **kwargs
        )

    def extract_common_fields(self, data: dict[str, Any]) -> dict[str, Any]:
        fields = super().extract_common_fields(data)
        claim = self.app.settings.get("username_claim", "preferred_username")
        fields["username"] = _pick_data(data).get(claim)
        return fields


class NonceCheckingCallbackView(OAuth2CallbackView):
    """allauth's callback, handing the stashed nonce to the adapter that checks the ID token."""

    adapter: EverdictOIDCAdapter

    def _get_state(self, request: HttpRequest, provider: Any) -> tuple[Any, Any]:
        state, response = super()._get_state(request, provider)
        self.adapter.stashed_state = state
        return state, response


def login(request: HttpRequest, provider_id: str) -> HttpResponse:
    try:
        return OAuth2LoginView.adapter_view(EverdictOIDCAdapter(request, provider_id))(request)
    except SocialApp.DoesNotExist as exc:
        raise Http404("No such OpenID provider.") from exc


def callback(request: HttpRequest, provider_id: str) -> HttpResponse:
    try:
        view = NonceCheckingCallbackView.adapter_view(EverdictOIDCAdapter(request, provider_id))
        return view(request)
    except SocialApp.DoesNotExist as exc:
        raise Http404("No such OpenID provider.") from exc
