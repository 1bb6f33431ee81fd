from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from accounts.services import api_key_create
from scorecards.models import Membership, Role, Workspace

pytestmark = pytest.mark.django_db


class Api:
    """The REST API as one user sees it, through a bearer key."""

    def __init__(self, client: Client, user: Any) -> None:
        self.client = client
        self.headers = {"Authorization": f"Bearer {api_key_create(user=user).key}"}

    def get(self, path: str) -> Any:
        return self.client.get(path, headers=self.headers)

    def post(self, path: str, body: Any) -> Any:
        return self.client.post(
            path, json.dumps(body), content_type="application/json", headers=self.headers
        )

    def patch(self, path: str, body: Any) -> Any:
        return self.client.patch(
            path, json.dumps(body), content_type="application/json", headers=self.headers
        )


@pytest.fixture
def as_alice(client: Client, alice: Any) -> Api:
    return Api(client, alice)


@pytest.fixture
def as_bob(client: Client, bob: Any) -> Api:
    return Api(client, bob)


@pytest.fixture
def as_charlie(client: Client, charlie: Any) -> Api:
    return Api(client, charlie)


def test_the_creator_of_a_workspace_becomes_its_owner(as_charlie: Api, charlie: Any) -> None:
    reply = as_charlie.post("/api/workspaces", {"slug": "evals", "name": "Evals"})

    assert reply.status_code == 201
    assert reply.json() == {
        "slug": "evals",
        "name": "Evals",
        "run_quota": None,
        "budget_usd": None,
        "budget_tokens": None,
        "spent_usd": 0.0,
        "spent_tokens": 0,
        "role": "owner",
    }
    assert Membership.objects.get(workspace__slug="evals").user == charlie


def test_a_taken_slug_is_a_conflict(as_charlie: Api, workspace: Any) -> None:
    reply = as_charlie.post("/api/workspaces", {"slug": "acme", "name": "Mine now"})

    assert reply.status_code == 409
    assert "slug" in reply.json()
    assert Workspace.objects.get(slug="acme").name == "Acme"


@pytest.mark.parametrize(
    "body",
    [{}, {"slug": "has space", "name": "x"}, {"slug": "ok"}, {"slug": "s" * 51, "name": "x"}],
)
def test_creating_a_workspace_refuses_bad_input(as_alice: Api, body: Any) -> None:
    reply = as_alice.post("/api/workspaces", body)

    assert reply.status_code == 400
    assert not Workspace.objects.exists()


def test_an_outsider_sees_nothing_of_a_workspace(as_charlie: Api, workspace: Any) -> None:
    assert as_charlie.get("/api/workspaces/acme").status_code == 404
    assert as_charlie.patch("/api/workspaces/acme", {"name": "x"}).status_code == 404
    reply = as_charlie.post(
        "/api/workspaces/acme/members", {"username": "charlie", "role": "owner"}
    )
    assert reply.status_code == 404
    assert as_charlie.get("/api/workspaces").json() == []
    assert not Membership.objects.filter(user__username="charlie").exists()


def test_a_member_reads_but_cannot_change_the_workspace(as_bob: Api, workspace: Any) -> None:
    assert as_bob.get("/api/workspaces/acme").json()["role"] == "member"

    reply = as_bob.patch("/api/workspaces/acme", {"name": "Bob's"})

    assert reply.status_code == 403
    assert Workspace.objects.get(slug="acme").name == "Acme"


def test_an_admin_renames_but_cannot_set_quota_or_budget(
    as_bob: Api, bob: Any, workspace: Any
) -> None:
    Membership.objects.filter(user=bob).update(role=Role.ADMIN)

    renamed = as_bob.patch("/api/workspaces/acme", {"name": "Acme Labs"})
    quota = as_bob.patch("/api/workspaces/acme", {"name": "Sneaky", "run_quota": 1000})
    budget = as_bob.patch("/api/workspaces/acme", {"budget_usd": "5"})

    assert renamed.status_code == 200
    assert renamed.json()["name"] == "Acme Labs" and renamed.json()["role"] == "admin"
    assert quota.status_code == 403 and budget.status_code == 403
    workspace.refresh_from_db()
    assert (workspace.name, workspace.run_quota, workspace.budget_usd) == ("Acme Labs", None, None)


def test_the_owner_sets_quota_and_budget(as_alice: Api, workspace: Any) -> None:
    reply = as_alice.patch(
        "/api/workspaces/acme", {"run_quota": 10, "budget_usd": "12.5", "budget_tokens": 10**6}
    )

    assert reply.status_code == 200
    body = reply.json()
    assert (body["run_quota"], body["budget_usd"], body["budget_tokens"]) == (10, 12.5, 10**6)
    assert body["role"] == "owner"
    unlimited = as_alice.patch("/api/workspaces/acme", {"run_quota": None})
    assert unlimited.json()["run_quota"] is None
    workspace.refresh_from_db()
    assert workspace.run_quota is None and workspace.budget_tokens == 10**6


@pytest.mark.parametrize(
    "body",
    [
        {"run_quota": -1},
        {"run_quota": "many"},
        {"run_quota": 2**40},
        {"budget_usd": "abc"},
        {"budget_usd": "-1"},
        {"budget_usd": "NaN"},
        {"budget_usd": "1e20"},
        {"budget_tokens": -5},
        {"name": ""},
        {"name": "n" * 201},
        ["name"],
    ],
)
def test_updating_a_workspace_refuses_bad_values(as_alice: Api, workspace: Any, body: Any) -> None:
    reply = as_alice.patch("/api/workspaces/acme", body)

    assert reply.status_code == 400
    workspace.refresh_from_db()
    assert (workspace.name, workspace.run_quota, workspace.budget_usd) == ("Acme", None, None)


def test_a_malformed_json_body_is_a_400(client: Client, as_alice: Api, workspace: Any) -> None:
    reply = client.patch(
        "/api/workspaces/acme",
        "{name:",
        content_type="application/json",
        headers=as_alice.headers,
    )

    assert reply.status_code == 400
    assert "detail" in reply.json()


def test_the_owner_adds_a_member(as_alice: Api, charlie: Any, workspace: Any) -> None:
    reply = as_alice.post("/api/workspaces/acme/members", {"username": "charlie", "role": "viewer"})

    assert reply.status_code == 201
    assert reply.json() == {"workspace": "acme", "username": "charlie", "role": "viewer"}
    assert Membership.objects.get(workspace=workspace, user=charlie).role == Role.VIEWER


def test_a_member_cannot_add_members(as_bob: Api, charlie: Any, workspace: Any) -> None:
    reply = as_bob.post("/api/workspaces/acme/members", {"username": "charlie", "role": "member"})

    assert reply.status_code == 403
    assert not Membership.objects.filter(user=charlie).exists()


def test_an_admin_cannot_grant_ownership(
    as_bob: Api, bob: Any, charlie: Any, workspace: Any
) -> None:
    Membership.objects.filter(user=bob).update(role=Role.ADMIN)

    owner = as_bob.post("/api/workspaces/acme/members", {"username": "charlie", "role": "owner"})
    member = as_bob.post("/api/workspaces/acme/members", {"username": "charlie", "role": "member"})

    assert owner.status_code == 403
    assert member.status_code == 201
    assert Membership.objects.get(user=charlie).role == Role.MEMBER


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"username": "nobody", "role": "member"}, "username"),
        ({"username": "charlie", "role": "king"}, "role"),
        ({"role": "member"}, "username"),
    ],
)
def test_adding_a_member_refuses_bad_input(
    as_alice: Api, charlie: Any, workspace: Any, body: Any, field: str
) -> None:
    reply = as_alice.post("/api/workspaces/acme/members", body)

    assert reply.status_code == 400
    assert field in reply.json()
    assert not Membership.objects.filter(user=charlie).exists()


def test_it_lists_my_workspaces_with_my_role(as_bob: Api, alice: Any, workspace: Any) -> None:
    from scorecards.services import workspace_create

    workspace_create(user=alice, slug="private", name="Private")

    reply = as_bob.get("/api/workspaces")

    assert [(w["slug"], w["role"]) for w in reply.json()] == [("acme", "member")]
