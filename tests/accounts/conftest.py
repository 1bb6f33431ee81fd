from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

from everdict.settings import oidc_providers
from tests.accounts.oidc_client import ProviderSession
from tests.oidc import Account, Provider, oidc_provider

APP = "http://testserver"
CALLBACK = "/accounts/oidc/sso/login/callback/"
NAME = "Acme SSO"


def use_provider(settings: Any, idp: Provider, **app_settings: Any) -> None:
    """Point this process's settings at the test provider, as OIDC_* would."""
    providers = oidc_providers(
        issuer=idp.issuer,
        client_id=idp.client_id,
        secret=idp.client_secret,
        name=NAME,
        scopes=["openid", "email", "profile"],
        username_claim=app_settings.pop("username_claim", "preferred_username"),
    )
    providers["openid_connect"]["APPS"][0]["settings"].update(app_settings)
    settings.SOCIALACCOUNT_PROVIDERS = providers
    settings.OIDC_ENABLED = True
    settings.OIDC_PROVIDER_NAME = NAME


@pytest.fixture
def idp(tmp_path: Path, settings: Any) -> Iterator[Provider]:
    with oidc_provider(
        tmp_path,
        redirect_uris=[f"{APP}{CALLBACK}"],
        post_logout_redirect_uris=[f"{APP}/login/"],
    ) as provider:
        use_provider(settings, provider)
        yield provider


class SignIn:
    """One browser: the app's test client and the provider's cookies."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.provider = ProviderSession(APP)
        self.authorize_url = ""

    def start(self, next_url: str = "/") -> str:
        reply = self.client.post("/accounts/oidc/sso/login/", {"next": next_url})
        assert reply.status_code == 302, reply.content[:500]
        self.authorize_url = reply["Location"]
        return self.authorize_url

    def __call__(self, account: Account | None, next_url: str = "/") -> Any:
        """Sign in; the app's reply to the provider's redirect back."""
        callback = self.provider.authorize(self.start(next_url), account)
        return self.client.get(callback)

    @property
    def authorize_query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.authorize_url).query)


@pytest.fixture
def sign_in(client: Client, db: Any) -> SignIn:
    return SignIn(client)
