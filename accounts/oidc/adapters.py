"""Who an OpenID sign-in signs in: allauth's adapters, with this server's rules.

- A member is found by the provider's `sub` (allauth's SocialAccount).
- On a first sign-in a local user is created — or, only when the provider says the email is
  verified, linked to the one local account with that email that no provider account is
  linked to yet. Anyone else gets an account of their own, under a distinct username.
- Email and name follow the provider at every sign-in.
- With OIDC_ALLOWED_DOMAINS, only verified addresses in those domains sign in.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from allauth.account.adapter import DefaultAccountAdapter
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.models import SocialLogin
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.validators import validate_email
from django.forms import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

if TYPE_CHECKING:
    from django.contrib.auth.models import User

log = logging.getLogger(__name__)

# The raw ID token of the provider sign-in of this session, for logout at the provider.
ID_TOKEN_SESSION_KEY = "everdict_oidc_id_token"
NAME_MAX = 150


class AccountAdapter(DefaultAccountAdapter):
    def is_open_for_signup(self, request: HttpRequest) -> bool:
        # Nobody signs up with a password here: accounts come from an operator or a provider.
        return False

    def post_login(self, request: HttpRequest, user: User, **kwargs: Any) -> HttpResponse:
        response = super().post_login(request, user, **kwargs)
        sociallogin = (kwargs.get("signal_kwargs") or {}).get("sociallogin")
        if sociallogin is not None and sociallogin.state.get("id_token"):
            # After Django's login() (which renews the session), so it stays with this one.
            request.session[ID_TOKEN_SESSION_KEY] = sociallogin.state["id_token"]
        return response


class SocialAccountAdapter(DefaultSocialAccountAdapter):
    def is_open_for_signup(self, request: HttpRequest, sociallogin: SocialLogin) -> bool:
        return True

    def on_authentication_error(
        self,
        request: HttpRequest,
        provider: Any,
        error: Any = None,
        exception: Any = None,
        extra_context: Any = None,
    ) -> None:
        # The page says only that it failed; the reason is for the operator.
        log.warning("sign-in with %s refused (%s): %s", provider.name, error, exception)

    def pre_social_login(self, request: HttpRequest, sociallogin: SocialLogin) -> None:
        email = verified_email(sociallogin)
        if settings.OIDC_ALLOWED_DOMAINS:
            refuse_outside_domains(request, sociallogin, email)
        if sociallogin.is_existing:
            refresh_profile(sociallogin)
        elif email and (user := linkable_user(email, sociallogin.account.provider)):
            sociallogin.connect(request, user)
            refresh_profile(sociallogin)


def verified_email(sociallogin: SocialLogin) -> str | None:
    """The address the provider vouches for (`email_verified: true`), if any."""
    for address in sociallogin.email_addresses:
        if address.verified and address.email:
            return str(address.email)
    return None


def refuse_outside_domains(
    request: HttpRequest, sociallogin: SocialLogin, email: str | None
) -> None:
    domains = settings.OIDC_ALLOWED_DOMAINS
    name = sociallogin.provider.name
    if email is None:
        reason = f"{name} did not confirm a verified email address for you"
    elif email.rpartition("@")[2].lower() not in domains:
        reason = f"{email} is not an address at {' or '.join(domains)}"
    else:
        return
    messages.error(request, f"Sign-in refused: {reason}. Ask an administrator for access.")
    raise ImmediateHttpResponse(redirect("login"))


def linkable_user(email: str, provider: str) -> Any:
    """The one active local account with this email that no account of this provider is
    linked to, or None (none, or several: then nobody is guessed)."""
    candidates = list(
        get_user_model()
        .objects.filter(email__iexact=email, is_active=True)
        .exclude(socialaccount__provider=provider)[:2]
    )
    return candidates[0] if len(candidates) == 1 else None


def refresh_profile(sociallogin: SocialLogin) -> None:
    """Keep the user's email and name as the provider has them now."""
    user = sociallogin.user
    common = sociallogin.provider.extract_common_fields(sociallogin.account.extra_data)
    first, _, last = (common.get("name") or "").partition(" ")
    wanted = {
        "email": _email_or(common.get("email"), user.email),
        "first_name": (common.get("first_name") or first or user.first_name)[:NAME_MAX],
        "last_name": (common.get("last_name") or last or user.last_name)[:NAME_MAX],
    }
    changed = {field: value for field, value in wanted.items() if getattr(user, field) != value}
    if changed:
        get_user_model().objects.filter(pk=user.pk).update(**changed)
        user.refresh_from_db(fields=list(changed))


def _email_or(value: Any, current: str) -> str:
    try:
        validate_email(value)
    except ValidationError:
        return current
    return str(value)
