from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from accounts.models import ApiKey
from accounts.services import api_key_authenticate, api_key_create

pytestmark = pytest.mark.django_db


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_it_creates_a_key_shown_once_that_authenticates(client: Client, alice: Any) -> None:
    headers = bearer(api_key_create(user=alice).key)

    reply = client.post(
        "/api/api-keys",
        json.dumps({"name": "ci"}),
        content_type="application/json",
        headers=headers,
    )

    assert reply.status_code == 201
    body = reply.json()
    assert set(body) == {"id", "name", "prefix", "key"}
    assert body["key"].startswith("evk_") and body["key"].startswith(body["prefix"])
    assert api_key_authenticate(body["key"]).user == alice  # type: ignore[union-attr]
    assert not ApiKey.objects.filter(key_hash__contains=body["key"]).exists()
    listing = client.get("/api/api-keys", headers=bearer(body["key"]))
    assert listing.status_code == 200
    assert body["key"] not in listing.content.decode()
    assert {item["name"] for item in listing.json()} == {"", "ci"}
    assert set(listing.json()[0]) == {"id", "name", "prefix", "created_at", "last_used_at"}


def test_it_lists_only_my_active_keys(client: Client, alice: Any, bob: Any) -> None:
    mine = api_key_create(user=alice, name="mine")
    gone = api_key_create(user=alice, name="gone")
    api_key_create(user=bob, name="bobs")
    client.delete(f"/api/api-keys/{gone.api_key.pk}", headers=bearer(mine.key))

    reply = client.get("/api/api-keys", headers=bearer(mine.key))

    assert [item["name"] for item in reply.json()] == ["mine"]


def test_a_revoked_key_stops_working_at_once(client: Client, alice: Any) -> None:
    keeper = api_key_create(user=alice).key
    doomed = api_key_create(user=alice)

    reply = client.delete(f"/api/api-keys/{doomed.api_key.pk}", headers=bearer(keeper))

    assert reply.status_code == 204
    assert client.get("/api/api-keys", headers=bearer(doomed.key)).status_code == 401


def test_bob_cannot_revoke_alices_key(client: Client, alice: Any, bob: Any) -> None:
    alices = api_key_create(user=alice)

    reply = client.delete(
        f"/api/api-keys/{alices.api_key.pk}", headers=bearer(api_key_create(user=bob).key)
    )

    assert reply.status_code == 404
    assert api_key_authenticate(alices.key) is not None


def test_it_refuses_an_over_long_key_name(client: Client, alice: Any) -> None:
    headers = bearer(api_key_create(user=alice).key)

    reply = client.post(
        "/api/api-keys",
        json.dumps({"name": "n" * 101}),
        content_type="application/json",
        headers=headers,
    )

    assert reply.status_code == 400
    assert "name" in reply.json()
    assert ApiKey.objects.count() == 1


def test_the_api_keys_need_authentication(client: Client) -> None:
    assert client.get("/api/api-keys").status_code == 401
    assert client.post("/api/api-keys", "{}", content_type="application/json").status_code == 401


def test_the_openapi_schema_describes_the_api(client: Client) -> None:
    reply = client.get("/api/schema/", headers={"Accept": "application/vnd.oai.openapi+json"})

    assert reply.status_code == 200
    paths = json.loads(reply.content)["paths"]
    for path in (
        "/api/runners",
        "/api/runners/{runner_id}",
        "/api/api-keys",
        "/api/workspaces",
        "/api/workspaces/{slug}/members",
    ):
        assert path in paths


def test_the_api_docs_page_works_offline(client: Client) -> None:
    reply = client.get("/api/docs/")

    assert reply.status_code == 200
    page = reply.content.decode()
    assert "cdn." not in page and "unpkg" not in page
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in page
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
