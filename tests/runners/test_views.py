from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from accounts.models import ApiKey
from accounts.services import api_key_authenticate, api_key_create
from runners.models import Runner
from runners.presence import runner_touch
from runners.services import runner_authenticate, runner_pair

pytestmark = pytest.mark.django_db

TOKEN_RE = re.compile(r"rnr_[A-Za-z0-9_-]{20,}")
KEY_RE = re.compile(r"evk_[A-Za-z0-9_-]{20,}")


@pytest.fixture
def alice_client(client: Client, alice: Any) -> Client:
    client.force_login(alice)
    return client


def test_the_account_page_needs_a_login(client: Client) -> None:
    reply = client.get("/account/")

    assert reply.status_code == 302
    assert reply["Location"].startswith("/login/")


def test_a_member_logs_in_and_sees_their_workspaces(
    client: Client, alice: Any, workspace: Any
) -> None:
    assert client.get("/login/").status_code == 200

    reply = client.post("/login/", {"username": "alice", "password": "alice-pw"}, follow=True)

    page = reply.content.decode()
    assert reply.status_code == 200
    assert 'href="/w/acme/"' in page and "owner" in page
    assert 'href="/account/"' in page


def test_the_home_page_lists_only_my_workspaces(
    client: Client, charlie: Any, workspace: Any
) -> None:
    client.force_login(charlie)

    page = client.get("/").content.decode()

    assert "/w/acme/" not in page


def test_logging_out_is_a_post(alice_client: Client) -> None:
    reply = alice_client.post("/logout/")

    assert reply.status_code == 302
    assert alice_client.get("/account/").status_code == 302


def test_pairing_from_the_account_page_shows_the_token_once(alice_client: Client) -> None:
    reply = alice_client.post(
        "/account/runners/pair",
        {"label": "laptop", "capabilities": "claude, node  python,"},
        follow=True,
    )

    # Post/redirect/get: a reload of the page that shows the token re-submits nothing.
    assert reply.redirect_chain == [("/account/", 302)]
    assert reply.status_code == 200
    page = reply.content.decode()
    runner = Runner.objects.get()
    assert runner.label == "laptop"
    assert runner.capabilities == ["claude", "node", "python"]
    token = TOKEN_RE.search(page).group(0)  # type: ignore[union-attr]
    assert f"python -m runnercli pair --server http://testserver --token {token}" in page
    assert runner_authenticate(token) == runner
    assert "no-store" in reply["Cache-Control"]
    again = alice_client.get("/account/").content.decode()
    assert token not in again and not TOKEN_RE.search(again)
    assert "laptop" in again


def test_the_pairing_command_uses_the_public_url(alice_client: Client, settings: Any) -> None:
    settings.EVERDICT_PUBLIC_URL = "https://evals.example.com/"

    page = alice_client.post(
        "/account/runners/pair", {"label": "laptop"}, follow=True
    ).content.decode()

    assert "python -m runnercli pair --server https://evals.example.com --token rnr_" in page


@pytest.mark.parametrize(
    "form",
    [
        {"label": "", "capabilities": "claude"},
        {"label": "x" * 101},
        {"label": "laptop", "capabilities": "claude, Bad!Cap"},
        {"label": "laptop", "capabilities": " ".join(f"c{i}" for i in range(65))},
    ],
)
def test_the_pairing_form_refuses_bad_input_and_creates_nothing(
    alice_client: Client, form: dict[str, str]
) -> None:
    reply = alice_client.post("/account/runners/pair", form)

    assert reply.status_code == 400
    assert 'class="errorlist' in reply.content.decode()
    assert not TOKEN_RE.search(reply.content.decode())
    assert not Runner.objects.exists()


def test_revoking_from_the_account_page_stops_the_token(alice_client: Client, alice: Any) -> None:
    paired = runner_pair(owner=alice, label="laptop")

    reply = alice_client.post(f"/account/runners/{paired.runner.pk}/revoke", follow=True)

    assert reply.status_code == 200
    assert runner_authenticate(paired.token) is None
    page = reply.content.decode()
    assert "is revoked" in page
    assert f"/account/runners/{paired.runner.pk}/revoke" not in page


def test_revoking_is_a_post_only(alice_client: Client, alice: Any) -> None:
    paired = runner_pair(owner=alice, label="laptop")

    assert alice_client.get(f"/account/runners/{paired.runner.pk}/revoke").status_code == 405
    assert runner_authenticate(paired.token) is not None


def test_bob_cannot_revoke_alices_runner_from_his_page(
    client: Client, alice: Any, bob: Any
) -> None:
    paired = runner_pair(owner=alice, label="laptop")
    client.force_login(bob)

    reply = client.post(f"/account/runners/{paired.runner.pk}/revoke", follow=True)

    assert "Runner not found." in reply.content.decode()
    assert runner_authenticate(paired.token) is not None


def test_the_account_forms_are_csrf_protected(alice: Any, alice_client: Client) -> None:
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(alice)
    paired = runner_pair(owner=alice, label="laptop")

    assert strict.post("/account/runners/pair", {"label": "x"}).status_code == 403
    assert strict.post(f"/account/runners/{paired.runner.pk}/revoke").status_code == 403
    assert Runner.objects.count() == 1
    assert runner_authenticate(paired.token) is not None


def test_the_roster_shows_presence_and_the_coloured_status(
    alice_client: Client, alice: Any, bob: Any
) -> None:
    busy = runner_pair(owner=alice, label="busy-box", capabilities=["claude"]).runner
    runner_touch(runner=busy, status="last job failed: exit 2")
    runner_pair(owner=alice, label="idle-box")
    runner_pair(owner=bob, label="bobs-box")

    page = alice_client.get("/account/").content.decode()

    assert "busy-box" in page and "idle-box" in page and "bobs-box" not in page
    assert '<span class="status-error">last job failed: exit 2</span>' in page
    assert 'class="dot online"' in page
    assert "never" in page


def test_an_api_key_created_on_the_page_is_shown_once(alice_client: Client, alice: Any) -> None:
    reply = alice_client.post("/account/api-keys/create", {"name": "ci"}, follow=True)

    assert reply.status_code == 200
    key = KEY_RE.search(reply.content.decode()).group(0)  # type: ignore[union-attr]
    api_key = api_key_authenticate(key)
    assert api_key is not None and api_key.user == alice and api_key.name == "ci"
    again = alice_client.get("/account/").content.decode()
    assert not KEY_RE.search(again)
    assert "ci" in again and api_key.prefix in again


def test_an_api_key_is_revoked_from_the_page(alice_client: Client, alice: Any, bob: Any) -> None:
    mine = api_key_create(user=alice, name="mine")
    bobs = api_key_create(user=bob, name="bobs")

    alice_client.post(f"/account/api-keys/{mine.api_key.pk}/revoke")
    alice_client.post(f"/account/api-keys/{bobs.api_key.pk}/revoke")

    assert api_key_authenticate(mine.key) is None
    assert api_key_authenticate(bobs.key) is not None
    assert ApiKey.objects.active().count() == 1
