from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.live import LiveServer, daphne

# Long enough that only a dispatch notification can wake a parked lease_job in time.
SLOW_RECHECK_S = 30


def live_server_fixtures(name: str, served_as: str, **env: Any) -> tuple[Any, Any]:
    """Fixtures for a module's own daphne with these settings, over the test database.

    `<name>_process` starts one server per module: starting daphne costs seconds, and it
    keeps no state between tests that matters (each test's rows are flushed and ids are
    never reused). `served_as` is the per-test fixture giving it with a flushed database.
    Assign both to module-level names so that pytest finds them.
    """
    process_name = f"{name}_process"

    @pytest.fixture(scope="module", name=process_name)
    def process(django_db_setup: Any, tmp_path_factory: Any) -> Iterator[LiveServer]:
        with daphne(tmp_path_factory.mktemp(name), **env) as server:
            yield server

    @pytest.fixture(name=served_as)
    def served(request: Any, transactional_db: Any) -> LiveServer:
        server: LiveServer = request.getfixturevalue(process_name)
        return server

    return process, served


# A real daphne serving /mcp over the test database; parked long-polls re-check slowly.
gateway_process, gateway = live_server_fixtures(
    "gateway", "gateway", EVERDICT_LEASE_TTL_S=5, EVERDICT_WAKE_RECHECK_S=SLOW_RECHECK_S
)
