"""EVERDICT_PASSWORD_LOGIN=0 closes password sign-in everywhere, the admin included; settings
errors name their variable."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.test import Client

from tests.live import ROOT

CLOSED = ["accounts.backends.PasswordClosedBackend"]


@pytest.fixture
def closed(settings: Any) -> None:
    settings.EVERDICT_PASSWORD_LOGIN = False
    settings.AUTHENTICATION_BACKENDS = CLOSED
    settings.OIDC_ENABLED = True
    settings.OIDC_PROVIDER_NAME = "Acme SSO"


@pytest.fixture
def operator(db: Any) -> Any:
    return get_user_model().objects.create_superuser("op", password="op-pw")


def test_the_login_page_has_no_password_form_and_refuses_a_posted_one(
    client: Client, closed: None, alice: Any
) -> None:
    page = client.get("/login/").content.decode()
    assert 'id="password-form"' not in page and 'name="password"' not in page
    assert "Sign in with Acme SSO" in page

    reply = client.post("/login/", {"username": "alice", "password": "alice-pw"})

    assert reply.status_code == 403
    assert "Password sign-in is closed on this server." in reply.content.decode()
    assert "_auth_user_id" not in client.session


def test_the_admin_login_refuses_passwords_and_sends_to_the_login_page(
    client: Client, closed: None, operator: Any
) -> None:
    assert client.get("/admin/login/?next=/admin/").headers["Location"] == "/login/?next=/admin/"

    reply = client.post("/admin/login/", {"username": "op", "password": "op-pw"})

    assert reply.status_code == 302 and reply["Location"].startswith("/login/")
    assert "_auth_user_id" not in client.session
    assert client.get("/admin/").status_code == 302


def test_no_password_authenticates_while_closed(closed: None, operator: Any) -> None:
    assert authenticate(username="op", password="op-pw") is None


def test_a_member_signed_in_otherwise_keeps_their_session_and_admin_rights(
    client: Client, closed: None, operator: Any
) -> None:
    client.force_login(operator, backend=CLOSED[0])

    assert client.get("/admin/").status_code == 200
    assert client.get("/account/").status_code == 200


def test_passwords_stay_the_embedded_default(client: Client, operator: Any) -> None:
    reply = client.post("/admin/login/", {"username": "op", "password": "op-pw", "next": "/admin/"})

    assert reply.status_code == 302 and reply["Location"] == "/admin/"


SSO = {
    "OIDC_ISSUER": "https://sso.example.com/realms/acme",
    "OIDC_CLIENT_ID": "everdict",
    "OIDC_CLIENT_SECRET": "s3cret",
    "OIDC_PROVIDER_NAME": "Acme SSO",
}


def settings_error(**env: str) -> str:
    """What loading the settings with this environment says (empty when they load)."""
    child = {k: v for k, v in os.environ.items() if not k.startswith(("OIDC_", "EVERDICT_PASS"))}
    child.update(env, DJANGO_SETTINGS_MODULE="everdict.settings")
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=child,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return "" if done.returncode == 0 else done.stderr.strip().splitlines()[-1]


@pytest.mark.once
@pytest.mark.parametrize(
    ("env", "named"),
    [
        (
            {"OIDC_ISSUER": SSO["OIDC_ISSUER"]},
            "OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_PROVIDER_NAME",
        ),
        ({**SSO, "OIDC_CLIENT_SECRET": ""}, "OIDC_CLIENT_SECRET must be set"),
        ({**SSO, "OIDC_ISSUER": "http://sso.example.com"}, "OIDC_ISSUER must be an https:// URL"),
        ({**SSO, "OIDC_SCOPES": "email profile"}, "OIDC_SCOPES must include openid"),
        ({**SSO, "OIDC_USERNAME_CLAIM": "a b"}, "OIDC_USERNAME_CLAIM must be a claim name"),
        ({**SSO, "OIDC_ALLOWED_DOMAINS": "acme.com,@x"}, "OIDC_ALLOWED_DOMAINS: not a domain"),
        ({"EVERDICT_PASSWORD_LOGIN": "0"}, "EVERDICT_PASSWORD_LOGIN=0 needs OIDC_ISSUER"),
        ({"EVERDICT_PASSWORD_LOGIN": "maybe"}, "EVERDICT_PASSWORD_LOGIN must be a boolean"),
        ({"EVERDICT_DEVICE_CODE_RATE": "lots"}, "EVERDICT_DEVICE_CODE_RATE must be a rate"),
    ],
)
def test_a_settings_error_names_its_variable(env: dict[str, str], named: str) -> None:
    error = settings_error(**env)

    assert error.startswith("django.core.exceptions.ImproperlyConfigured: "), error
    assert named in error


@pytest.mark.once
def test_a_complete_provider_with_passwords_closed_loads() -> None:
    assert settings_error(**SSO, EVERDICT_PASSWORD_LOGIN="0", OIDC_ALLOWED_DOMAINS="acme.com") == ""
