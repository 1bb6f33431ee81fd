"""A runner's verified token is kept briefly, never past its revocation.

On PostgreSQL the gateway keeps verified runner principals for EVERDICT_AUTH_CACHE_S, and
forgets one at once when its runner is revoked anywhere (the revocation is announced with
NOTIFY to every process). On SQLite nothing is kept: every call looks the token up.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.db import connection

from runners.services import runner_pair, runner_revoke
from tests.live import LiveServer, metric
from tests.mcpgateway.conftest import live_server_fixtures
from tests.mcpgateway.test_auth import raw_post

pytestmark = pytest.mark.e2e

CACHE_S = 3


authcache_process, server = live_server_fixtures(
    "authcache", "server", EVERDICT_AUTH_CACHE_S=CACHE_S
)


def call_status(server: LiveServer, token: str) -> int:
    """The HTTP status of one MCP request with this bearer token (401: refused)."""
    status, _, _ = raw_post(f"{server.url}/mcp", {"Authorization": f"Bearer {token}"})
    return status


def test_a_revoked_runner_is_refused_at_once_though_its_token_was_kept(
    server: LiveServer, alice: Any
) -> None:
    paired = runner_pair(owner=alice, label="laptop")
    assert call_status(server, paired.token) == 200
    assert call_status(server, paired.token) == 200  # answered from the kept principal

    runner_revoke(owner=alice, runner_id=paired.runner.pk)  # this process, not the server's
    refused_after = time.monotonic() + 1.0
    status = call_status(server, paired.token)
    while status == 200 and time.monotonic() < refused_after:
        status = call_status(server, paired.token)
    assert status == 401


def test_an_owner_deactivated_behind_the_servers_back_loses_access_within_the_bound(
    server: LiveServer, alice: Any
) -> None:
    paired = runner_pair(owner=alice, label="laptop")
    assert call_status(server, paired.token) == 200
    type(alice).objects.filter(pk=alice.pk).update(is_active=False)  # no announcement

    if connection.vendor == "postgresql":
        # Kept: the next calls within the bound are answered without a lookup...
        assert call_status(server, paired.token) == 200
        time.sleep(CACHE_S + 0.5)
    # ...and once it has passed (at once on SQLite, which keeps nothing), refused.
    assert call_status(server, paired.token) == 401


def test_an_owner_deactivated_by_an_admin_loses_access_at_once(
    server: LiveServer, alice: Any
) -> None:
    paired = runner_pair(owner=alice, label="laptop")
    assert call_status(server, paired.token) == 200
    alice.is_active = False
    alice.save()  # as the admin's user page does

    refused_after = time.monotonic() + 1.0
    status = call_status(server, paired.token)
    while status == 200 and time.monotonic() < refused_after:
        status = call_status(server, paired.token)
    assert status == 401


def test_a_runner_polling_past_the_bound_is_verified_again_in_bulk_not_call_by_call(
    server: LiveServer, alice: Any
) -> None:
    paired = runner_pair(owner=alice, label="laptop")
    assert call_status(server, paired.token) == 200
    before = metric(server.url, "everdict_runner_token_lookups_total")
    calls = 0
    until = time.monotonic() + 2 * CACHE_S + 1
    while time.monotonic() < until:
        assert call_status(server, paired.token) == 200
        calls += 1
        time.sleep(0.5)
    looked_up = metric(server.url, "everdict_runner_token_lookups_total") - before
    # On SQLite nothing is kept: every call is looked up.
    assert looked_up == (0 if connection.vendor == "postgresql" else calls)

    type(alice).objects.filter(pk=alice.pk).update(is_active=False)  # no announcement
    refused_after = time.monotonic() + CACHE_S + 0.5
    status = call_status(server, paired.token)
    while status == 200 and time.monotonic() < refused_after:
        time.sleep(0.2)
        status = call_status(server, paired.token)
    assert status == 401, "verifying again keeps the bound"
