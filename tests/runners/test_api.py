from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from accounts.services import api_key_create, api_key_revoke
from runners.models import Runner
from runners.replies import runner_items
from runners.roster import runners_of
from runners.services import runner_authenticate, runner_pair, runner_revoke

pytestmark = pytest.mark.django_db


def bearer(user: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key_create(user=user, name='test').key}"}


def post_json(client: Client, path: str, body: Any, headers: dict[str, str]) -> Any:
    return client.post(path, json.dumps(body), content_type="application/json", headers=headers)


def test_a_bearer_key_pairs_a_runner_and_the_token_is_seen_only_in_that_reply(
    client: Client, alice: Any
) -> None:
    headers = bearer(alice)
    reply = post_json(
        client,
        "/api/runners",
        {"label": "laptop", "os": "linux", "capabilities": ["claude", "node", "claude"]},
        headers,
    )

    assert reply.status_code == 201
    body = reply.json()
    assert set(body) == {"id", "label", "os", "capabilities", "token"}
    assert body["label"] == "laptop"
    assert body["capabilities"] == ["claude", "node"]
    token = body["token"]
    assert token.startswith("rnr_")
    runner = Runner.objects.get(pk=body["id"])
    assert runner.owner == alice
    assert runner_authenticate(token) == runner
    for row in Runner.objects.values():
        assert all(token not in str(value) for value in row.values())
    listing = client.get("/api/runners", headers=headers)
    assert token not in listing.content.decode()


def test_it_lists_only_my_runners_revoked_ones_marked(client: Client, alice: Any, bob: Any) -> None:
    mine = runner_pair(owner=alice, label="alice-laptop", capabilities=["python"]).runner
    gone = runner_pair(owner=alice, label="alice-old").runner
    runner_pair(owner=bob, label="bob-laptop")
    client.delete(f"/api/runners/{gone.pk}", headers=bearer(alice))

    reply = client.get("/api/runners", headers=bearer(alice))

    assert reply.status_code == 200
    items = {item["label"]: item for item in reply.json()}
    assert set(items) == {"alice-laptop", "alice-old"}
    assert items["alice-laptop"] == {
        "id": mine.pk,
        "label": "alice-laptop",
        "os": "",
        "capabilities": ["python"],
        "online": False,
        "last_seen_at": None,
        "status": "",
        "revoked": False,
    }
    assert items["alice-old"]["revoked"] is True


def test_a_revoked_runners_token_is_refused_at_once(client: Client, alice: Any) -> None:
    paired = runner_pair(owner=alice, label="laptop")
    assert runner_authenticate(paired.token) is not None

    reply = client.delete(f"/api/runners/{paired.runner.pk}", headers=bearer(alice))

    assert reply.status_code == 204
    assert runner_authenticate(paired.token) is None


def test_revoking_twice_is_harmless(client: Client, alice: Any) -> None:
    runner = runner_pair(owner=alice, label="laptop").runner
    headers = bearer(alice)
    assert client.delete(f"/api/runners/{runner.pk}", headers=headers).status_code == 204
    assert client.delete(f"/api/runners/{runner.pk}", headers=headers).status_code == 204


def test_bob_cannot_revoke_alices_runner(client: Client, alice: Any, bob: Any) -> None:
    paired = runner_pair(owner=alice, label="laptop")

    reply = client.delete(f"/api/runners/{paired.runner.pk}", headers=bearer(bob))

    assert reply.status_code == 404
    assert runner_authenticate(paired.token) is not None


@pytest.mark.parametrize("runner_id", ["999999", str(2**70)])
def test_revoking_an_unknown_runner_is_not_found(
    client: Client, alice: Any, runner_id: str
) -> None:
    assert client.delete(f"/api/runners/{runner_id}", headers=bearer(alice)).status_code == 404


def test_pairing_records_a_workspace_i_belong_to(
    client: Client, alice: Any, workspace: Any
) -> None:
    reply = post_json(client, "/api/runners", {"label": "l", "workspace": "acme"}, bearer(alice))

    assert reply.status_code == 201
    assert Runner.objects.get(pk=reply.json()["id"]).workspace == workspace


@pytest.mark.parametrize("slug", ["acme", "nowhere"])
def test_pairing_refuses_a_workspace_i_am_not_in(
    client: Client, charlie: Any, workspace: Any, slug: str
) -> None:
    reply = post_json(client, "/api/runners", {"label": "l", "workspace": slug}, bearer(charlie))

    assert reply.status_code == 400
    assert "workspace" in reply.json()
    assert not Runner.objects.exists()


def _runner_token(user: Any) -> str:
    return runner_pair(owner=user, label="laptop").token


def _revoked_key(user: Any) -> str:
    issued = api_key_create(user=user)
    api_key_revoke(user=user, key_id=issued.api_key.pk)
    return issued.key


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer    ",
        "Bearer garbage",
        "Bearer evk_not-a-real-key",
        "Basic YWxpY2U6YWxpY2UtcHc=",
        "Bearer \u00e9\u00e9\u00e9",
        "runner-token",
        "revoked-key",
    ],
)
def test_the_api_refuses_a_missing_garbled_unknown_or_runner_bearer(
    client: Client, alice: Any, authorization: str | None
) -> None:
    if authorization == "runner-token":
        authorization = f"Bearer {_runner_token(alice)}"
    elif authorization == "revoked-key":
        authorization = f"Bearer {_revoked_key(alice)}"
    headers = {} if authorization is None else {"Authorization": authorization}

    listing = client.get("/api/runners", headers=headers)
    pairing = post_json(client, "/api/runners", {"label": "sneaky"}, headers)

    assert listing.status_code == 401
    assert pairing.status_code == 401
    assert "detail" in pairing.json()
    assert Runner.objects.filter(label="sneaky").count() == 0


def test_a_runner_token_is_refused_with_a_reason(client: Client, alice: Any) -> None:
    reply = client.get("/api/runners", headers={"Authorization": f"Bearer {_runner_token(alice)}"})

    assert reply.status_code == 401
    assert "/mcp" in reply.json()["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "label"),
        ({"label": ""}, "label"),
        ({"label": "   "}, "label"),
        ({"label": "x" * 101}, "label"),
        ({"label": "nul\x00byte"}, "label"),
        ({"label": None}, "label"),
        ({"label": "ok", "capabilities": ["Claude"]}, "capabilities"),
        ({"label": "ok", "capabilities": ["-dash"]}, "capabilities"),
        ({"label": "ok", "capabilities": ["a" * 41]}, "capabilities"),
        ({"label": "ok", "capabilities": ["has space"]}, "capabilities"),
        ({"label": "ok", "capabilities": "claude"}, "capabilities"),
        ({"label": "ok", "capabilities": [{"x": 1}]}, "capabilities"),
        ({"label": "ok", "capabilities": [f"c{i}" for i in range(65)]}, "capabilities"),
        ({"label": "ok", "os": "o" * 101}, "os"),
        ({"label": "ok", "workspace": "not a slug"}, "workspace"),
        ([{"label": "ok"}], "non_field_errors"),
    ],
)
def test_pairing_refuses_bad_input_with_field_errors_and_creates_nothing(
    client: Client, alice: Any, body: Any, field: str
) -> None:
    reply = post_json(client, "/api/runners", body, bearer(alice))

    assert reply.status_code == 400
    assert field in reply.json()
    assert not Runner.objects.exists()


@pytest.mark.parametrize(
    ("raw", "content_type"),
    [
        ('{"label": "ok"', "application/json"),
        ("label=ok", "application/json"),
        ("\xff\xfe", "application/json"),
        ("label=ok", "application/x-www-form-urlencoded"),
    ],
)
def test_pairing_refuses_a_body_that_is_not_json(
    client: Client, alice: Any, raw: str, content_type: str
) -> None:
    reply = client.post("/api/runners", raw, content_type=content_type, headers=bearer(alice))

    assert reply.status_code in (400, 415)
    assert "detail" in reply.json()
    assert not Runner.objects.exists()


def test_a_logged_in_session_can_use_the_api(client: Client, alice: Any) -> None:
    client.force_login(alice)
    runner_pair(owner=alice, label="laptop")

    reply = client.get("/api/runners")

    assert reply.status_code == 200
    assert [item["label"] for item in reply.json()] == ["laptop"]


def test_the_roster_is_read_in_one_statement_whatever_its_size_as_the_model_orders_it(
    client: Client, alice: Any, bob: Any, django_assert_num_queries: Any
) -> None:
    for label in ["b-desk", "a-laptop", "b-desk", "c-old", "a-ci"]:
        runner_pair(owner=alice, label=label, capabilities=["python"])
    runner_pair(owner=bob, label="a-bobs")
    runner_revoke(owner=alice, runner_id=Runner.objects.get(label="c-old").pk)

    with django_assert_num_queries(1):
        roster = runners_of(alice)

    expected = list(Runner.objects.owned_by(alice))
    assert [r.pk for r in roster] == [r.pk for r in expected]
    assert [r.label for r in roster] == ["a-ci", "a-laptop", "b-desk", "b-desk", "c-old"]
    assert [runner_items([r])[0] for r in roster] == runner_items(expected)
    assert runners_of(alice.pk) == roster
    assert runners_of(bob)[0].label == "a-bobs"
    headers = bearer(alice)
    client.get("/api/runners", headers=headers)  # the key is looked up once
    reply = client.get("/api/runners", headers=headers)
    assert [item["label"] for item in reply.json()] == [r.label for r in roster]
    assert [item["revoked"] for item in reply.json()] == [False] * 4 + [True]
