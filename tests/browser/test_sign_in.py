"""In Debian's chromium, against daphne and a real OpenID provider (npm's oidc-provider): sign
in on the provider's own page, land home as that member, log out of both, sign in again as the
same member; with password sign-in closed, no password form anywhere, the admin's included."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from allauth.socialaccount.models import SocialAccount
from django.contrib.auth import get_user_model

from everdict.processes import free_port
from tests.browser.test_run_page import CHROMIUM_ARGS, Console
from tests.live import LiveServer, daphne
from tests.oidc import ALICE, oidc_provider
from tests.required import CHROMIUM

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


@contextmanager
def app_with_provider(tmp_path: Path, **env: Any) -> Iterator[LiveServer]:
    port = free_port()
    with (
        oidc_provider(
            tmp_path,
            redirect_uris=[f"http://127.0.0.1:{port}/accounts/oidc/sso/login/callback/"],
            post_logout_redirect_uris=[f"http://127.0.0.1:{port}/login/"],
        ) as idp,
        daphne(tmp_path, port=port, **idp.env(name="Acme SSO"), **env) as server,
    ):
        yield server


@contextmanager
def chromium(console: Console) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield console.watch(browser.new_page())
        finally:
            browser.close()


def sign_in_at_the_provider(page: Any, server: LiveServer, *, asked: bool = True) -> None:
    page.goto(f"{server.url}/login/")
    page.click("#sso-sign-in")
    if asked:
        page.wait_for_selector("#login")
        assert page.url.startswith("http://127.0.0.1:") and "/interaction/" in page.url
        page.fill("#login", ALICE.preferred_username)
        page.fill("#password", ALICE.password)
        page.click("#sign-in")
    page.wait_for_url(f"{server.url}/")


def test_a_member_signs_in_at_the_provider_and_out_of_both(
    transactional_db: Any, tmp_path: Path
) -> None:
    console = Console()
    with app_with_provider(tmp_path) as server, chromium(console) as page:
        sign_in_at_the_provider(page, server)
        assert page.inner_text("header.site").count("Log out alice") == 1
        first_account = page.goto(f"{server.url}/account/")
        assert first_account is not None and "Account alice" in page.inner_text("h1")

        page.click("text=Log out alice")
        page.click("#logout-yes")  # the provider's own confirmation
        page.wait_for_url(f"{server.url}/login/")
        assert "Log in" in page.inner_text("h1")
        assert page.goto(f"{server.url}/account/") is not None
        assert page.url.startswith(f"{server.url}/login/")

        # Signed out at the provider too: it asks for the password again.
        sign_in_at_the_provider(page, server, asked=True)
        assert "Log out alice" in page.inner_text("header.site")
    assert console.errors == []
    (user,) = get_user_model().objects.all()
    assert (user.username, user.email) == ("alice", ALICE.email)
    assert SocialAccount.objects.get().user == user


def test_with_passwords_closed_the_form_is_gone_and_the_admin_signs_in_at_the_provider(
    transactional_db: Any, tmp_path: Path
) -> None:
    get_user_model().objects.create_superuser("op", email=ALICE.email, password="op-pw")
    console = Console()
    with (
        app_with_provider(tmp_path, EVERDICT_PASSWORD_LOGIN="0") as server,
        chromium(console) as page,
    ):
        page.goto(f"{server.url}/admin/")
        page.wait_for_url(f"{server.url}/login/?next=/admin/")
        assert page.locator("input[type=password]").count() == 0
        assert page.locator("#password-form").count() == 0
        csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
        refused = page.request.post(
            f"{server.url}/admin/login/",
            form={"csrfmiddlewaretoken": csrf, "username": "op", "password": "op-pw"},
            headers={"Referer": f"{server.url}/admin/login/"},
            max_redirects=0,
        )
        assert refused.status == 302 and refused.headers["location"].startswith("/login/")
        posted = page.request.post(
            f"{server.url}/login/",
            form={"csrfmiddlewaretoken": csrf, "username": "op", "password": "op-pw"},
            headers={"Referer": f"{server.url}/login/"},
        )
        assert posted.status == 403

        page.click("#sso-sign-in")
        page.fill("#login", ALICE.email)
        page.fill("#password", ALICE.password)
        page.click("#sign-in")
        page.wait_for_url(f"{server.url}/admin/")
        assert "Site administration" in page.inner_text("body")
    # Django's own admin pages name no icon, so the browser asks for /favicon.ico (a 404).
    assert [error for error in console.errors if "/favicon.ico" not in error] == []
