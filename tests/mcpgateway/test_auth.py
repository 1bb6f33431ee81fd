"""Who may call what on /mcp: bearer checks before any tool, least privilege inside."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from email.message import Message
from typing import Any

import pytest

from accounts.services import api_key_create, api_key_revoke
from runners.services import runner_revoke
from tests.mcpgateway.mcp_client import call, error_text, structured
from tests.suites import pair

pytestmark = pytest.mark.e2e

LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def raw_post(
    url: str, headers: dict[str, str], body: Any = LIST_TOOLS
) -> tuple[int, Message, bytes]:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


@pytest.fixture
def keys(alice: Any) -> dict[str, str]:
    runner = pair(alice)
    from runners.services import runner_pair

    paired = runner_pair(owner=alice, label="paired")
    revoked = runner_pair(owner=alice, label="revoked")
    runner_revoke(owner=alice, runner_id=revoked.runner.pk)
    dead_key = api_key_create(user=alice)
    api_key_revoke(user=alice, key_id=dead_key.api_key.pk)
    del runner
    return {
        "runner": paired.token,
        "revoked_runner": revoked.token,
        "api_key": api_key_create(user=alice).key,
        "revoked_api_key": dead_key.key,
    }


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer ",
        "Bearer garbage",
        "Bearer rnr_",
        "Bearer evk_not-a-key",
        "Basic YWxpY2U6YWxpY2UtcHc=",
    ],
)
def test_it_answers_401_to_a_missing_or_malformed_bearer(
    gateway: Any, authorization: str | None
) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    status, response_headers, body = raw_post(f"{gateway.url}/mcp", headers)
    assert status == 401
    assert response_headers["WWW-Authenticate"].startswith("Bearer")
    assert json.loads(body)["error"] == "invalid_token"


@pytest.mark.parametrize("which", ["revoked_runner", "revoked_api_key"])
def test_it_answers_401_to_a_revoked_token(gateway: Any, keys: dict[str, str], which: str) -> None:
    status, _, _ = raw_post(f"{gateway.url}/mcp", {"Authorization": f"Bearer {keys[which]}"})
    assert status == 401


def test_it_serves_the_trailing_slash_path_too(gateway: Any, keys: dict[str, str]) -> None:
    status, _, body = raw_post(f"{gateway.url}/mcp/", {"Authorization": f"Bearer {keys['runner']}"})
    assert status == 200, body
    assert b"lease_job" in body


def test_it_refuses_a_host_outside_allowed_hosts(gateway: Any, keys: dict[str, str]) -> None:
    status, _, _ = raw_post(
        f"{gateway.url}/mcp",
        {"Authorization": f"Bearer {keys['runner']}", "Host": "evil.example"},
    )
    assert status == 421


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("hello", {"protocol": 2}),
        ("lease_job", {"protocol": 2}),
        ("heartbeat_job", {"job_id": 1, "lease_epoch": 1}),
        ("report_case_log", {"job_id": 1, "lease_epoch": 1, "lines": ["x"]}),
        ("fail_job", {"job_id": 1, "lease_epoch": 1, "message": "x"}),
        (
            "submit_job_result",
            {"job_id": 1, "lease_epoch": 1, "result": {"status": "completed", "output": "x"}},
        ),
    ],
)
def test_an_api_key_gets_a_tool_error_from_a_runner_tool(
    gateway: Any, keys: dict[str, str], tool: str, args: dict[str, Any]
) -> None:
    result = call(gateway.url, keys["api_key"], tool, args)
    assert result.is_error
    assert f"{tool} is a runner tool" in error_text(result)
    assert result.structured_content is None


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("list_runners", {}),
        ("list_api_keys", {}),
        ("pair_runner", {"label": "sneaky"}),
        ("revoke_runner", {"runner_id": 1}),
        ("get_run", {"run_id": 1}),
        (
            "start_run",
            {"workspace": "acme", "harness": "echo", "dataset": "echo", "runtime": "self:any"},
        ),
    ],
)
def test_a_runner_token_gets_a_tool_error_from_a_personal_tool(
    gateway: Any, keys: dict[str, str], tool: str, args: dict[str, Any]
) -> None:
    result = call(gateway.url, keys["runner"], tool, args)
    assert result.is_error
    assert f"{tool} is a personal tool" in error_text(result)
    assert result.structured_content is None


def test_hello_says_which_runner_the_token_belongs_to(
    gateway: Any, alice: Any, keys: dict[str, str]
) -> None:
    reply = structured(
        call(gateway.url, keys["runner"], "hello", {"protocol": 2, "status": "idle"})
    )
    assert reply["label"] == "paired"
    assert reply["owner"] == "alice"
    assert reply["server_protocol"] == 4
    assert reply["update_required"] is False


def test_hello_tells_an_outdated_runner_to_update(gateway: Any, keys: dict[str, str]) -> None:
    reply = structured(call(gateway.url, keys["runner"], "hello", {"protocol": 0}))
    assert reply["update_required"] is True
