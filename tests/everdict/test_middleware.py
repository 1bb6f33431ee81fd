"""The middleware under ASGI (`core.middleware`): hooks on the event loop, a thread only for
what touches the database — a sign-in's session saved, a message stored, a form's CSRF check.
Each request goes through Django's ASGI handler (`AsyncClient`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import SyncToAsync, async_to_sync
from django.test import AsyncClient

from tests.suites import pair, start, suite

pytestmark = pytest.mark.django_db(transaction=True)

STOCK = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "allauth.account.middleware.AccountMiddleware",
]


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The name of each function sent to a thread, in order."""
    sent: list[str] = []
    call = SyncToAsync.__call__

    async def counting(self: SyncToAsync[Any, Any], *args: Any, **kwargs: Any) -> Any:
        sent.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await call(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", counting)
    yield sent


def get(client: AsyncClient, path: str, **kwargs: Any) -> Any:
    return async_to_sync(client.get)(path, **kwargs)


def post(client: AsyncClient, path: str, data: dict[str, str], **kwargs: Any) -> Any:
    return async_to_sync(client.post)(path, data, **kwargs)


def csrf_token(page: str) -> str:
    found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
    assert found, page[:500]
    return found.group(1)


def test_a_request_goes_to_a_thread_for_its_sync_view_not_for_each_hook(
    hops: list[str], settings: Any
) -> None:
    reply = get(AsyncClient(), "/healthz")
    ours = list(hops)
    assert reply.status_code == 200 and reply["X-Frame-Options"] == "DENY"
    assert reply["X-Content-Type-Options"] == "nosniff"
    # The handler's signals (connections checked at both ends) and the view itself.
    assert not [name for name in ours if "process_" in name], ours
    assert len(ours) <= 4, ours

    settings.MIDDLEWARE = STOCK
    hops.clear()
    assert get(AsyncClient(), "/healthz").status_code == 200
    assert len([name for name in hops if "process_" in name]) >= 10, hops


@pytest.mark.parametrize("csrf_in_session", [False, True], ids=["cookie", "session"])
def test_a_password_sign_in_saves_the_session_and_the_next_page_knows_the_member(
    alice: Any, hops: list[str], settings: Any, csrf_in_session: bool
) -> None:
    # CSRF_USE_SESSIONS keeps the form's secret in the session: read and saved in a thread.
    settings.CSRF_USE_SESSIONS = csrf_in_session
    client = AsyncClient(enforce_csrf_checks=True)
    login = get(client, "/login/")
    assert login.status_code == 200
    assert ("csrftoken" in login.cookies) is not csrf_in_session
    token = csrf_token(login.content.decode())

    hops.clear()
    signed = post(
        client,
        "/login/",
        {"username": "alice", "password": "alice-pw", "csrfmiddlewaretoken": token},
    )

    assert signed.status_code == 302, signed.content.decode()[:500]
    assert "sessionid" in signed.cookies
    # The form's check read its body in a thread; the changed session was saved in one.
    assert any("CsrfViewMiddleware.process_view" in name for name in hops), hops
    assert any("SessionMiddleware.process_response" in name for name in hops), hops
    home = get(client, "/")
    assert home.status_code == 200 and "alice" in home.content.decode()


def test_a_form_without_its_csrf_token_is_refused_and_changes_nothing(alice: Any) -> None:
    client = AsyncClient(enforce_csrf_checks=True)
    get(client, "/login/")

    refused = post(client, "/login/", {"username": "alice", "password": "alice-pw"})

    assert refused.status_code == 403
    assert "sessionid" not in refused.cookies
    assert get(client, "/").status_code == 302  # still signed out: to the login page


def test_a_message_a_form_leaves_shows_on_the_next_page_once(alice: Any, workspace: Any) -> None:
    suite(alice, cases=1)
    run = start(alice, pair(alice))
    client = AsyncClient()
    async_to_sync(client.aforce_login)(alice)

    cancelled = post(client, f"/runs/{run.pk}/cancel", {})
    assert cancelled.status_code == 302 and cancelled["Location"] == f"/runs/{run.pk}/"

    page = get(client, cancelled["Location"]).content.decode()
    assert f"Run {run.pk} is canceled." in page
    assert f"Run {run.pk} is canceled." not in get(client, f"/runs/{run.pk}/").content.decode()
    # The slash a path lacks is added (the URLs resolved on the loop).
    assert get(client, f"/runs/{run.pk}")["Location"] == f"/runs/{run.pk}/"
