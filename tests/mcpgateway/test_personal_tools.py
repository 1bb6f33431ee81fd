"""Personal tools: the same services and shapes as the REST API, compared reply for reply."""

from __future__ import annotations

from typing import Any

import pytest

from accounts.services import api_key_create
from runners.models import Runner
from tests.mcpgateway.mcp_client import call, error_text, rest, structured
from tests.suites import pair, suite

pytestmark = pytest.mark.e2e


@pytest.fixture
def key(alice: Any, workspace: Any) -> str:
    suite(alice, cases=2)
    return api_key_create(user=alice, name="agent").key


def test_the_mcp_replies_equal_the_rest_replies(gateway: Any, alice: Any, key: str) -> None:
    api_key_create(user=alice, name="laptop script")
    rest_paired = rest(
        gateway.url, "POST", "/api/runners", key, {"label": "desktop", "capabilities": ["python"]}
    )[1]
    mcp_paired = structured(
        call(
            gateway.url,
            key,
            "pair_runner",
            {"label": "laptop", "os": "linux", "capabilities": ["python"]},
        )
    )
    assert set(mcp_paired) == set(rest_paired)
    assert mcp_paired["token"].startswith("rnr_")
    # The runner paired over MCP is real: its token works, and it shows up online with a status.
    hello = structured(
        call(gateway.url, mcp_paired["token"], "hello", {"protocol": 2, "status": "idle"})
    )
    assert hello["runner_id"] == mcp_paired["id"]
    structured(call(gateway.url, key, "revoke_runner", {"runner_id": rest_paired["id"]}))

    started = structured(
        call(
            gateway.url,
            key,
            "start_run",
            {
                "workspace": "acme",
                "harness": "echo",
                "dataset": "echo",
                "runtime": "self:any",
                "concurrency": 2,
            },
        )
    )
    assert started["status"] == "queued" and started["summary"]["total"] == 2

    for tool, args, path, unwrap in [
        ("list_runners", {}, "/api/runners", "runners"),
        ("list_api_keys", {}, "/api/api-keys", "keys"),
        ("get_run", {"run_id": started["id"]}, f"/api/runs/{started['id']}", None),
    ]:
        status, over_rest = rest(gateway.url, "GET", path, key)
        assert status == 200
        over_mcp = structured(call(gateway.url, key, tool, args))
        assert (over_mcp[unwrap] if unwrap else over_mcp) == over_rest, tool

    runners = structured(call(gateway.url, key, "list_runners"))["runners"]
    assert [(r["label"], r["revoked"], r["online"], r["status"]) for r in runners] == [
        ("desktop", True, False, ""),
        ("laptop", False, True, "idle"),
    ]


def test_revoking_someone_elses_runner_is_not_found(gateway: Any, bob: Any, key: str) -> None:
    bobs = pair(bob)
    result = call(gateway.url, key, "revoke_runner", {"runner_id": bobs.pk})
    assert result.is_error and "not found" in error_text(result).lower()
    assert Runner.objects.get(pk=bobs.pk).revoked_at is None


def test_service_errors_come_back_as_tool_errors_with_their_reason(
    gateway: Any, alice: Any, charlie: Any, key: str
) -> None:
    pair(alice)
    outsider = api_key_create(user=charlie).key
    cases: list[tuple[str, str, dict[str, Any], str]] = [
        (
            key,
            "start_run",
            {"workspace": "acme", "harness": "echo", "dataset": "echo", "runtime": "cloud"},
            "runtime",
        ),
        (
            key,
            "start_run",
            {"workspace": "acme", "harness": "nope", "dataset": "echo", "runtime": "self:any"},
            "nope",
        ),
        (
            outsider,
            "start_run",
            {"workspace": "acme", "harness": "echo", "dataset": "echo", "runtime": "self:any"},
            "not found",
        ),
        (key, "get_run", {"run_id": 999_999}, "not found"),
        (key, "pair_runner", {"label": "  "}, "label"),
        (key, "pair_runner", {"label": "x", "capabilities": ["Not A Capability"]}, "capabilities"),
    ]
    for token, tool, args, says in cases:
        result = call(gateway.url, token, tool, args)
        assert result.is_error, (tool, args)
        assert says in error_text(result).lower(), (tool, error_text(result))
