from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.live import LiveServer, daphne

# Long enough that only a dispatch notification can wake a parked lease_job in time.
SLOW_RECHECK_S = 30


@pytest.fixture(scope="module")
def gateway_process(django_db_setup: Any, tmp_path_factory: Any) -> Iterator[LiveServer]:
    # One server per module, over the test database `django_db_setup` made: starting daphne
    # costs seconds, and it keeps no state between tests that matters (each test's rows are
    # flushed and ids are never reused).
    with daphne(
        tmp_path_factory.mktemp("gateway"),
        EVERDICT_LEASE_TTL_S=5,
        EVERDICT_WAKE_RECHECK_S=SLOW_RECHECK_S,
    ) as server:
        yield server


@pytest.fixture
def gateway(gateway_process: LiveServer, transactional_db: Any) -> LiveServer:
    """A real daphne serving /mcp over the test database; parked long-polls re-check slowly."""
    return gateway_process
