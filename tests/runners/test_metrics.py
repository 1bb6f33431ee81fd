"""/metrics: queue depth, leases, fenced calls; loopback-only by default."""

from __future__ import annotations

from typing import Any

import pytest

from runners import queue
from tests.suites import completed, pair, start, suite

pytestmark = pytest.mark.django_db


def scrape(client: Any, **extra: Any) -> str:
    reply = client.get("/metrics", **extra)
    assert reply.status_code == 200, reply.content
    return reply.content.decode()


def value(text: str, prefix: str) -> float:
    for line in text.splitlines():
        if line.startswith(prefix + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{prefix} not in metrics")


def test_metrics_show_queue_depth_leases_and_fenced_calls(
    client: Any, alice: Any, workspace: Any
) -> None:
    suite(alice)
    laptop = pair(alice)
    start(alice, laptop, concurrency=2)
    before = scrape(client)
    assert value(before, 'everdict_queue_jobs{status="queued"}') == 2
    assert value(before, 'everdict_queue_jobs{status="pending"}') == 1
    leases_before = value(before, "everdict_leases_total")
    grant = queue.job_lease(runner=laptop)[0]
    queue.job_heartbeat(runner=laptop, job_id=grant.job.pk, lease_epoch=99)
    after = scrape(client)
    assert value(after, "everdict_leases_total") == leases_before + 1
    assert value(after, 'everdict_queue_jobs{status="leased"}') == 1
    assert value(after, "everdict_runners_online") == 1
    assert 'everdict_fenced_calls_total{call="heartbeat_job",reason="stale"}' in after
    assert "everdict_job_queue_wait_seconds_bucket" in after


def test_metrics_refuse_a_remote_caller_by_default(client: Any, settings: Any) -> None:
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 403
    settings.EVERDICT_METRICS = "s3cret"
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 403
    ok = client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer s3cret")
    assert ok.status_code == 200


def test_each_result_handed_to_its_grader_is_counted_and_a_refused_one_is_not(
    client: Any, alice: Any, bob: Any, workspace: Any
) -> None:
    from runnercli.protocol import ResultReport
    from scorecards.services import results_submit

    suite(alice, cases=2)
    laptop = pair(alice)
    start(alice, laptop, concurrency=2)
    grants = queue.job_lease(runner=laptop, max_jobs=2)
    before = value(scrape(client), "everdict_gradings_started_total")
    reports = [
        ResultReport(job_id=g.job.pk, lease_epoch=g.job.lease_epoch, result=completed("hello"))
        for g in grants
    ]
    results_submit(runner=laptop, reports=reports)
    assert value(scrape(client), "everdict_gradings_started_total") == before + 2
    # Someone else's runner reporting on these jobs has nothing graded.
    results_submit(runner=pair(bob, label="bobs"), reports=reports)
    assert value(scrape(client), "everdict_gradings_started_total") == before + 2
