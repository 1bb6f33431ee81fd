"""The server pools its PostgreSQL connections: /metrics shows the pool, and ~30 API requests
through a real daphne open far fewer connections than they ask for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from accounts.services import api_key_create
from tests.live import daphne, rest
from tests.suites import pair, suite

pytestmark = [pytest.mark.e2e, pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

REQUESTS = 30


def pool_figures(base_url: str) -> dict[str, float]:
    import urllib.request

    with urllib.request.urlopen(f"{base_url}/metrics", timeout=30) as reply:
        text = reply.read().decode()
    return {
        name.removeprefix("everdict_db_pool_"): float(value)
        for name, _, value in (line.partition(" ") for line in text.splitlines())
        if name.startswith("everdict_db_pool_")
    }


def test_requests_through_the_server_share_a_few_pooled_connections(
    tmp_path: Path, alice: Any, workspace: Any
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("connection pooling is PostgreSQL's")
    suite(alice)
    pair(alice, "one")
    pair(alice, "two")
    key = api_key_create(user=alice, name="pool").key
    with daphne(tmp_path, EVERDICT_DB_POOL_MAX=4) as server:
        before = pool_figures(server.url)
        for _ in range(REQUESTS // 3):
            for path in ("/api/runners", "/api/workspaces", "/api/runners"):
                status, reply = rest(server.url, "GET", path, key)
                assert status == 200, reply
        after = pool_figures(server.url)
    served = after["requests_total"] - before["requests_total"]
    opened = after["connections_opened_total"]
    # Every API request asked the pool for a connection (a scrape asks for one too) ...
    assert served >= REQUESTS
    # ... and they were served by the few it opened, never more than its size.
    assert opened <= 4 < served / 5
    assert after["max"] == 4
    assert 1 <= after["size"] <= 4
    assert 0 <= after["available"] <= after["size"]
    assert after["requests_errors_total"] == 0


def test_the_metrics_show_no_pool_when_pooling_is_off(tmp_path: Path, alice: Any) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("connection pooling is PostgreSQL's")
    with daphne(tmp_path, EVERDICT_DB_POOL_MAX=0) as server:
        assert pool_figures(server.url) == {}
