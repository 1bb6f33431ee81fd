"""A shortened chaos soak: two replicas, two schedulers, five runner processes, ~150 jobs.

A few cases take seconds. While the jobs run, one runner is `kill -9`ed and restarted with
its token, one is `SIGSTOP`ped past its lease TTL and resumed, one sleeps as a laptop does
(it and its cases stopped past the lease, then continued), a replica and a scheduler are
killed and restarted, and one runner is revoked. Then the record is checked, as
`bench/soak.py` does at full size with the same machinery: every job succeeded exactly once,
from one attempt; what the chaos cut off ended expired or superseded and left no result (or
was resumed by its own runner); no job ended `no_runner` under a short idle timeout; no
result was refused for a transient reason; no case ran more often than it was leased,
counted by the harness itself.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

# The soak is a script in bench/ (run as `python bench/soak.py`), importable by its name.
import soak
from cluster import DEFAULT_REDIS

from tests.live import require_postgres_and_redis

pytestmark = [pytest.mark.e2e, pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

REDIS_URL = f"{DEFAULT_REDIS}/6"
BUDGET_S = 120


def test_a_short_chaos_soak_loses_no_job_and_records_no_fenced_off_result(tmp_path: Path) -> None:
    require_postgres_and_redis(REDIS_URL)
    config = soak.SoakConfig(
        jobs=150,
        runners=5,
        seed=7,
        jobs_per_run=50,
        # Cases long enough that every strike lands while jobs are leased; a few take seconds.
        sleep_ms=(300, 1500),
        long_share=0.05,
        long_ms=(2_000, 5_000),
        plan=[
            "pause_runner",
            "sleep_runner",
            "kill_runner",
            "restart_replica",
            "revoke_runner",
            "restart_scheduler",
        ],
        chaos_gap_s=(0.5, 1.0),
        redis_url=REDIS_URL,
        timeout_s=BUDGET_S,
    )
    began = time.monotonic()
    report = soak.Soak(config, tmp_path).run()
    took = time.monotonic() - began
    print(report.text())

    assert report.ok, report.text()
    assert [e.kind for e in report.events] == list(config.plan or [])
    assert report.figures["succeeded"] == 150
    assert report.figures["executions"] >= 150
    pause = next(e for e in report.events if e.kind == "pause_runner")
    assert pause.cut >= 1, "the paused runner held no lease: the fence was not exercised"
    # Its late calls reached the fence and were refused (counted on the replicas).
    assert report.figures["fenced_stale"] >= 1, report.text()
    assert took < BUDGET_S, f"the soak took {took:.0f}s"
