"""Fixtures shared by the case files tests."""

from __future__ import annotations

from typing import Any

import pytest

from runners import queue
from tests.suites import pair, start, suite


@pytest.fixture
def leased(alice: Any, workspace: Any) -> dict[str, Any]:
    """One case of alice's run leased to her laptop: its runner, run, job and lease epoch."""
    suite(alice, cases=1)
    laptop = pair(alice, "laptop")
    run = start(alice, laptop)
    (grant,) = queue.job_lease(runner=laptop)
    return {"runner": laptop, "run": run, "job_id": grant.job.pk, "epoch": grant.job.lease_epoch}
