"""The OpenAPI schema declares the error replies the API really gives, in the shape it gives
them."""

from __future__ import annotations

import json
from typing import Any

import jsonschema_rs
import pytest
from django.test import Client

from accounts.services import api_key_create
from scorecards.models import Workspace
from tests.suites import pair, suite

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(client: Client) -> dict[str, Any]:
    reply = client.get("/api/schema/", headers={"Accept": "application/vnd.oai.openapi+json"})
    assert reply.status_code == 200
    return dict(json.loads(reply.content))


def declared(schema: dict[str, Any], method: str, path: str) -> dict[str, str]:
    """Status → the component its JSON body refers to ('' when there is no body)."""
    responses = schema["paths"][path][method]["responses"]
    return {
        status: response.get("content", {})
        .get("application/json", {})
        .get("schema", {})
        .get("$ref", "")
        .rpartition("/")[2]
        for status, response in responses.items()
    }


def test_the_schema_declares_the_error_components(schema: dict[str, Any]) -> None:
    components = schema["components"]["schemas"]

    assert components["Error"]["required"] == ["detail"]
    assert components["Error"]["properties"]["detail"] == {"type": "string"}
    assert "additionalProperties" in components["ValidationError"]


def test_each_operation_lists_only_the_errors_it_can_give(schema: dict[str, Any]) -> None:
    revoke_runner = declared(schema, "delete", "/api/runners/{runner_id}")
    assert revoke_runner == {
        "204": "",
        "401": "Error",
        "403": "Error",
        "404": "Error",
        "406": "Error",
    }
    # A read without a body or path: nothing to be invalid, forbidden or missing.
    assert set(declared(schema, "get", "/api/workspaces")) == {"200", "401", "406"}
    assert declared(schema, "get", "/api/runs/{run_id}/logs")["400"] == "ValidationError"
    assert "403" not in declared(schema, "get", "/api/runs/{run_id}")
    assert declared(schema, "post", "/api/runners")["400"] == "ValidationError"
    assert declared(schema, "post", "/api/workspaces")["409"] == "ValidationError"
    assert declared(schema, "post", "/api/workspaces/{slug}/runs")["429"] == "Error"
    assert "429" not in declared(schema, "post", "/api/workspaces/{slug}/harnesses")


def test_the_service_errors_are_declared_on_the_view_methods_that_give_them() -> None:
    from scorecards.api.runs import RunCreateView
    from scorecards.api.workspaces import WorkspaceListView

    assert [e[0] for e in WorkspaceListView.post.service_errors] == [409]  # type: ignore[attr-defined]
    assert [e[0] for e in RunCreateView.post.service_errors] == [429]  # type: ignore[attr-defined]


def test_the_error_replies_match_what_their_operation_declares(
    client: Client, schema: dict[str, Any], alice: Any, bob: Any, workspace: Any
) -> None:
    suite(alice)
    runner = pair(alice)
    Workspace.objects.filter(pk=workspace.pk).update(run_quota=0)
    as_alice = {"Authorization": f"Bearer {api_key_create(user=alice).key}"}
    as_bob = {"Authorization": f"Bearer {api_key_create(user=bob).key}"}
    as_s = {**as_alice, "Accept": "S"}  # a media type no renderer gives
    start = {"harness": "echo", "dataset": "echo", "runtime": f"self:{runner.pk}"}
    calls: list[tuple[str, str, str, Any, dict[str, str], int]] = [
        ("get", "/api/runners", "/api/runners", None, {}, 401),
        ("post", "/api/runners", "/api/runners", {"capabilities": ["Bad!"]}, as_alice, 400),
        ("post", "/api/runners", "/api/runners", "{not json", as_alice, 400),
        ("delete", "/api/runners/{runner_id}", "/api/runners/999999", None, as_alice, 404),
        ("patch", "/api/workspaces/{slug}", "/api/workspaces/acme", {"run_quota": 5}, as_bob, 403),
        (
            "post",
            "/api/workspaces",
            "/api/workspaces",
            {"slug": "acme", "name": "A"},
            as_alice,
            409,
        ),
        ("post", "/api/workspaces/{slug}/runs", "/api/workspaces/acme/runs", start, as_alice, 429),
        ("get", "/api/runs/{run_id}/trace", "/api/runs/1/trace", None, as_s, 406),
        ("get", "/api/workspaces", "/api/workspaces", None, {"Accept": "S"}, 406),
    ]
    components = schema["components"]["schemas"]
    for method, operation, url, body, headers, status in calls:
        content = "" if body is None else body if isinstance(body, str) else json.dumps(body)
        reply = client.generic(
            method.upper(), url, content, content_type="application/json", headers=headers
        )
        assert reply.status_code == status, (method, url, reply.content)
        component = declared(schema, method, operation)[str(status)]
        validator = jsonschema_rs.validator_for(components[component])
        assert validator.is_valid(reply.json()), (method, url, component, reply.json())


def test_a_session_request_without_its_csrf_token_gets_the_declared_403(
    schema: dict[str, Any], alice: Any
) -> None:
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)

    reply = browser.post("/api/api-keys", "{}", content_type="application/json")

    assert reply.status_code == 403
    assert "CSRF" in reply.json()["detail"]
    assert declared(schema, "post", "/api/api-keys")["403"] == "Error"


def test_an_unrouted_api_path_is_refused_as_json_like_the_api_errors(
    client: Client, alice: Any
) -> None:
    headers = {"Authorization": f"Bearer {api_key_create(user=alice).key}"}

    for path in ("/api/runners/abc", "/api/workspaces/no%20slug/runs", "/api/nothing-here"):
        reply = client.get(path, headers=headers)

        assert reply.status_code == 404, path
        assert reply["Content-Type"] == "application/json"
        assert reply.json() == {"detail": "Not found."}
    page = client.get("/no-such-page")
    assert page.status_code == 404
    assert page["Content-Type"].startswith("text/html")


def test_a_request_refused_before_any_view_is_json_under_the_api(client: Client) -> None:
    # A Host outside ALLOWED_HOSTS is refused by Django itself (a 400, through handler400).
    reply = client.get("/api/runners", headers={"Host": "evil.example"})

    assert reply.status_code == 400
    assert reply["Content-Type"] == "application/json"
    assert reply.json() == {"detail": "Bad request."}
    page = client.get("/account/", headers={"Host": "evil.example"})
    assert page.status_code == 400
    assert page["Content-Type"].startswith("text/html")
