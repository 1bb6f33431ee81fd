"""approve_device_pairing: a member's agent approves a machine's code over /mcp, with the same
service and reply as the REST API; pair_runner records that it paired over MCP."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from accounts.services import api_key_create
from runners.models import DevicePairing, PairingMethod, Runner
from tests.mcpgateway.mcp_client import call, error_text, rest, structured
from tests.suites import pair

pytestmark = pytest.mark.e2e


def machine_asks(url: str, label: str = "ci-box") -> dict[str, Any]:
    request = urllib.request.Request(
        f"{url}/api/device-pairings",
        data=json.dumps({"label": label, "os": "Linux"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return dict(json.load(reply))


def test_an_agent_approves_a_code_and_the_reply_equals_the_rest_one(
    gateway: Any, alice: Any
) -> None:
    key = api_key_create(user=alice).key
    first, second = machine_asks(gateway.url), machine_asks(gateway.url, "other-box")

    over_mcp = structured(
        call(gateway.url, key, "approve_device_pairing", {"user_code": first["user_code"]})
    )
    over_rest = rest(
        gateway.url, "POST", f"/api/device-pairings/{second['user_code']}/approve", key
    )[1]

    assert over_mcp["status"] == "approved" and over_mcp["label"] == "ci-box"
    assert set(over_mcp) == set(over_rest)
    assert DevicePairing.objects.get(user_code=first["user_code"]).decided_by == alice


def test_a_runner_token_or_an_unknown_code_gets_a_tool_error(gateway: Any, alice: Any) -> None:
    from runners.services import runner_pair

    code = machine_asks(gateway.url)["user_code"]
    runner_token = runner_pair(owner=alice, label="laptop").token
    key = api_key_create(user=alice).key

    as_runner = call(gateway.url, runner_token, "approve_device_pairing", {"user_code": code})
    unknown = call(gateway.url, key, "approve_device_pairing", {"user_code": "BCDF-GHJK"})

    assert as_runner.is_error
    assert unknown.is_error and "no pairing request has this code" in error_text(unknown).lower()
    assert DevicePairing.objects.get(user_code=code).status == "pending"


def test_pair_runner_over_mcp_records_how_it_paired(gateway: Any, alice: Any) -> None:
    key = api_key_create(user=alice).key
    pair(alice, "made-by-service")

    paired = structured(call(gateway.url, key, "pair_runner", {"label": "by-agent"}))

    assert Runner.objects.get(pk=paired["id"]).paired_via == PairingMethod.MCP
