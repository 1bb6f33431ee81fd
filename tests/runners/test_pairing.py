"""Device pairing (RFC 8628's shape) through the REST API and the page: codes, polling,
approval binding the runner to the approver, single use, expiry, denial, throttles."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import time_machine
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from accounts.services import api_key_create
from runnercli.protocol.device import USER_CODE_RE
from runners.models import DevicePairing, PairingMethod, Runner
from runners.services import runner_authenticate

pytestmark = pytest.mark.django_db

MACHINE = {"label": "build-box", "os": "Linux 6.1", "capabilities": ["python", "linux"]}


@pytest.fixture(autouse=True)
def _fresh_throttles() -> Iterator[None]:
    cache.clear()  # the throttles count in the cache, per address and per member
    yield
    cache.clear()


def bearer(user: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key_create(user=user).key}"}


def ask(client: Client, body: Any = MACHINE) -> Any:
    return client.post(
        "/api/device-pairings",
        body,
        content_type="application/json",
        headers={"User-Agent": "runnercli/1"},
    )


def poll(client: Client, device_code: str) -> Any:
    return client.post(
        "/api/device-pairings/token", {"device_code": device_code}, content_type="application/json"
    )


def later(seconds: float) -> Any:
    return time_machine.travel(timezone.now() + timedelta(seconds=seconds))


def test_a_machine_gets_an_unambiguous_code_to_show_and_a_secret_to_poll_with(
    client: Client,
) -> None:
    reply = ask(client)

    assert reply.status_code == 200
    body = reply.json()
    assert USER_CODE_RE.match(body["user_code"])
    assert not set(body["user_code"]) & set("AEIOUY0123456789")
    assert body["verification_uri"] == "http://testserver/pair/"
    assert body["verification_uri_complete"] == f"http://testserver/pair/{body['user_code']}"
    assert (body["interval"], body["expires_in"]) == (5, 600)
    stored = DevicePairing.objects.get(user_code=body["user_code"])
    # Only the device code's SHA-256 is kept.
    assert stored.device_code_hash == hashlib.sha256(body["device_code"].encode()).hexdigest()
    assert body["device_code"] not in str(list(DevicePairing.objects.values()))
    assert (stored.label, stored.os, stored.capabilities) == (
        "build-box",
        "Linux 6.1",
        ["linux", "python"],
    )
    assert (stored.requested_from, stored.user_agent) == ("127.0.0.1", "runnercli/1")


def test_an_invalid_machine_is_refused_by_field(client: Client) -> None:
    reply = ask(client, {"label": "", "capabilities": ["Bad!"]})

    assert reply.status_code == 400
    assert set(reply.json()) == {"label", "capabilities"}
    assert not DevicePairing.objects.exists()


def test_approval_pairs_the_machine_as_the_approvers_runner_once(
    client: Client, alice: Any
) -> None:
    asked = ask(client).json()
    assert poll(client, asked["device_code"]).json()["error"] == "authorization_pending"

    approved = client.post(
        f"/api/device-pairings/{asked['user_code'].lower()}/approve", headers=bearer(alice)
    )
    assert approved.status_code == 200
    assert approved.json()["status"] == "approved" and approved.json()["label"] == "build-box"
    with later(6):
        collected = poll(client, asked["device_code"])
    with later(12):
        again = poll(client, asked["device_code"])

    assert collected.status_code == 200
    runner = Runner.objects.get(pk=collected.json()["runner_id"])
    assert (runner.owner, runner.label, runner.paired_via) == (
        alice,
        "build-box",
        PairingMethod.DEVICE,
    )
    assert runner.capabilities == ["linux", "python"]
    assert runner_authenticate(collected.json()["token"]) == runner
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert Runner.objects.count() == 1


def test_polling_faster_than_the_interval_slows_the_machine_down(client: Client) -> None:
    device_code = ask(client).json()["device_code"]
    poll(client, device_code)

    early = poll(client, device_code)

    assert early.json()["error"] == "slow_down"
    assert DevicePairing.objects.get().interval_s == 10
    with later(6):
        assert poll(client, device_code).json()["error"] == "slow_down"
    with later(6 + 16):
        assert poll(client, device_code).json()["error"] == "authorization_pending"


def test_a_denied_machine_is_told_so(client: Client, alice: Any) -> None:
    asked = ask(client).json()

    denied = client.post(f"/api/device-pairings/{asked['user_code']}/deny", headers=bearer(alice))

    assert denied.json()["status"] == "denied"
    assert poll(client, asked["device_code"]).json()["error"] == "access_denied"
    assert not Runner.objects.exists()


def test_an_expired_code_can_be_neither_approved_nor_collected(client: Client, alice: Any) -> None:
    asked = ask(client).json()

    with later(601):
        approve = client.post(
            f"/api/device-pairings/{asked['user_code']}/approve", headers=bearer(alice)
        )
        polled = poll(client, asked["device_code"])

    assert approve.status_code == 409 and "expired" in approve.json()["detail"]
    assert polled.json()["error"] == "expired_token"


def test_an_approval_not_collected_in_time_expires(client: Client, alice: Any) -> None:
    asked = ask(client).json()
    client.post(f"/api/device-pairings/{asked['user_code']}/approve", headers=bearer(alice))

    with later(601):
        assert poll(client, asked["device_code"]).json()["error"] == "expired_token"
    assert not Runner.objects.exists()


def test_a_decided_code_cannot_be_decided_again(client: Client, alice: Any, bob: Any) -> None:
    code = ask(client).json()["user_code"]
    client.post(f"/api/device-pairings/{code}/approve", headers=bearer(alice))

    reply = client.post(f"/api/device-pairings/{code}/deny", headers=bearer(bob))

    assert reply.status_code == 409 and "already approved" in reply.json()["detail"]
    assert DevicePairing.objects.get().decided_by == alice


def test_unknown_codes_and_bad_polls_are_clean_refusals(client: Client, alice: Any) -> None:
    for code in ("BCDF-GHJK", "AEIO-UAEI", "x"):
        reply = client.post(f"/api/device-pairings/{code}/approve", headers=bearer(alice))
        assert reply.status_code == 404, code
    assert poll(client, "dvc_nothing").json()["error"] == "invalid_grant"
    bad = client.post("/api/device-pairings/token", {"code": 1}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["error"] == "invalid_request"
    assert client.post("/api/device-pairings/BCDF-GHJK/approve").status_code == 401


def test_guessing_codes_is_throttled_per_member(
    client: Client, alice: Any, bob: Any, settings: Any
) -> None:
    settings.EVERDICT_THROTTLE_RATES = {**settings.EVERDICT_THROTTLE_RATES, "device_code": "3/min"}
    code = ask(client).json()["user_code"]
    as_alice = bearer(alice)

    wrong = [
        client.post(f"/api/device-pairings/{guess}/approve", headers=as_alice).status_code
        for guess in ("BCDF-BCDF", "BCDF-BCDG", "BCDF-BCDH")
    ]
    right = client.post(f"/api/device-pairings/{code}/approve", headers=as_alice)
    page = Client()
    page.force_login(alice)
    on_the_page = page.get(f"/pair/{code}")

    assert wrong == [404, 404, 404]
    assert right.status_code == 429 and int(right["Retry-After"]) > 0
    assert on_the_page.status_code == 429
    assert DevicePairing.objects.get().status == "pending"
    # Another member is not slowed down by alice's guesses.
    assert (
        client.post(f"/api/device-pairings/{code}/approve", headers=bearer(bob)).status_code == 200
    )


def test_asking_for_codes_is_throttled_per_address(client: Client, settings: Any) -> None:
    settings.EVERDICT_THROTTLE_RATES = {
        **settings.EVERDICT_THROTTLE_RATES,
        "device_pairing": "2/min",
    }

    statuses = [ask(client).status_code for _ in range(3)]

    assert statuses == [200, 200, 429]
    assert DevicePairing.objects.count() == 2


def test_the_page_shows_what_asks_and_from_where_then_approves(client: Client, alice: Any) -> None:
    code = ask(client).json()["user_code"]
    assert client.get(f"/pair/{code}")["Location"] == f"/login/?next=/pair/{code}"
    client.force_login(alice)

    page = client.get(f"/pair/{code}").content.decode()
    account = client.get("/account/").content.decode()
    approved = client.post(f"/pair/{code}/approve", follow=True).content.decode()

    for shown in (code, "build-box", "Linux 6.1", "python", "127.0.0.1", "runnercli/1"):
        assert shown in page
    assert 'id="approve"' in page and 'id="deny"' in page
    assert "Pending device approvals" in account and f"/pair/{code}" in account
    assert "Approved: “build-box” is pairing as your runner." in approved
    assert DevicePairing.objects.get().decided_by == alice
    assert "approved — waiting for the machine" in client.get("/account/").content.decode()


def test_a_typed_code_is_found_however_it_is_typed(client: Client, alice: Any) -> None:
    code = ask(client).json()["user_code"]
    client.force_login(alice)

    reply = client.get("/pair/", {"code": f" {code.lower().replace('-', ' ')} "})

    assert reply["Location"] == f"/pair/{code}"
    assert client.get("/pair/", {"code": "hello"}).status_code == 400


def test_the_roster_shows_when_and_how_each_runner_was_paired(client: Client, alice: Any) -> None:
    client.force_login(alice)
    client.post("/account/runners/pair", {"label": "on-page", "capabilities": "python"})
    client.post(
        "/api/runners", {"label": "by-api"}, content_type="application/json", headers=bearer(alice)
    )

    page = client.get("/account/").content.decode()

    assert dict(Runner.objects.values_list("label", "paired_via")) == {
        "on-page": PairingMethod.PAGE,
        "by-api": PairingMethod.API,
    }
    assert "· account page" in page and "· REST API" in page
