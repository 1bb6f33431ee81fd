"""Per-case overhead: settling a batch of results and starting a run each take a fixed
number of statements, whatever the batch's or the run's size (no statement per row)."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runnercli.protocol import ResultReport
from runners import queue
from scorecards.services import results_submit
from tests.suites import completed, pair, start, suite

pytestmark = pytest.mark.django_db


def _settle(user: Any, runner: Any, name: str, cases: int) -> list[str]:
    suite(user, cases=cases, name=name)
    start(user, runner, harness=name, dataset=name, concurrency=cases)
    grants: list[Any] = []
    while len(grants) < cases:  # at most MAX_JOBS_PER_LEASE a lease
        grants += queue.job_lease(runner=runner, max_jobs=cases - len(grants))
    assert len(grants) == cases
    reports = [
        ResultReport(
            job_id=g.job.pk,
            lease_epoch=g.job.lease_epoch,
            result=completed(f"hello {g.job.case_key[1:]}"),
        )
        for g in grants
    ]
    with CaptureQueriesContext(connection) as queries:
        acks = results_submit(runner=runner, reports=reports)
    assert all(ack.accepted for ack in acks), acks
    return [q["sql"] for q in queries.captured_queries]


def _start(user: Any, runner: Any, name: str, cases: int) -> list[str]:
    suite(user, cases=cases, name=name)
    with CaptureQueriesContext(connection) as queries:
        start(user, runner, harness=name, dataset=name, concurrency=cases)
    return [q["sql"] for q in queries.captured_queries]


def test_settling_a_batch_takes_the_same_statements_for_1_result_as_for_50(
    alice: Any, workspace: Any
) -> None:
    laptop = pair(alice)
    one = _settle(alice, laptop, "one", 1)
    fifty = _settle(alice, laptop, "fifty", 50)
    assert len(fifty) == len(one), "\n".join(fifty)


def test_starting_a_run_takes_the_same_statements_for_1_case_as_for_50(
    alice: Any, workspace: Any
) -> None:
    laptop = pair(alice)
    one = _start(alice, laptop, "one", 1)
    fifty = _start(alice, laptop, "fifty", 50)
    assert len(fifty) == len(one), "\n".join(fifty)
