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
from scorecards.services.grading import Graded, grade_reports, grading_plan
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


def _reports(user: Any, runner: Any, name: str, cases: int, lease: int) -> list[ResultReport]:
    """Reports of `lease` of a run's `cases` (the rest stay queued: the run goes on)."""
    suite(user, cases=cases, name=name)
    start(user, runner, harness=name, dataset=name, concurrency=cases)
    grants = queue.job_lease(runner=runner, max_jobs=lease)
    assert len(grants) == lease
    return [
        ResultReport(
            job_id=g.job.pk,
            lease_epoch=g.job.lease_epoch,
            result=completed(f"hello {g.job.case_key[1:]}"),
        )
        for g in grants
    ]


def test_grading_a_batch_reads_its_jobs_harnesses_and_cases_in_one_statement(
    alice: Any, workspace: Any
) -> None:
    laptop = pair(alice)
    reports = _reports(alice, laptop, "graded", 40, 32)
    with CaptureQueriesContext(connection) as queries:
        graded = grade_reports(runner=laptop, reports=reports)
    assert len(queries.captured_queries) == 1, [q["sql"] for q in queries.captured_queries]
    assert sorted(graded) == sorted(r.job_id for r in reports)
    assert {g.grade.verdict for g in graded.values() if isinstance(g, Graded)} == {"pass"}


def test_grading_leaves_out_the_jobs_of_another_member(
    alice: Any, bob: Any, workspace: Any
) -> None:
    """The owner is checked on the rows read by id: a runner naming another member's jobs
    gets no grade for them, beside its own."""
    laptop, bobs = pair(alice), pair(bob, "bobs")
    reports = _reports(alice, laptop, "graded", 4, 4)
    assert grade_reports(runner=bobs, reports=reports) == {}
    assert sorted(grade_reports(runner=laptop, reports=reports)) == sorted(
        r.job_id for r in reports
    )


@pytest.mark.skipif(connection.vendor != "postgresql", reason="EXPLAIN plans are PostgreSQL's")
def test_grading_reads_jobs_by_id_and_cases_by_their_whole_key_whatever_the_statistics(
    alice: Any, workspace: Any
) -> None:
    """Grading runs prepared, and its plan may be kept from when the tables held a few rows
    (as these have never been analysed): it must still read the jobs by their ids, not all
    of their owner's, and each case by its dataset and key, not every case of the dataset."""
    laptop = pair(alice)
    reports = _reports(alice, laptop, "graded", 40, 8)
    with connection.cursor() as cursor:
        # The tables are a page each here: no scan of a whole table, as of a large one.
        cursor.execute("SET enable_seqscan = off")
        plan = grading_plan([r.job_id for r in reports])
        cursor.execute("RESET enable_seqscan")
    assert "runners_runnerjob_pkey" in plan, plan
    assert "owner_id" not in plan, plan
    assert "Index Cond: ((dataset_id = r.dataset_id) AND ((key)::text = (j.case_key)::text))" in (
        plan
    ), plan


def test_a_batch_settling_mid_run_takes_a_pinned_number_of_statements(
    alice: Any, workspace: Any
) -> None:
    """Grading 1, the runs locked 1, the jobs locked 1, jobs and attempts ended 2, the next
    result number 1, the results inserted 1, the run's load 1: 8, for 1 result as for 31."""
    laptop = pair(alice)
    counts = []
    for name, batch in (("first", 1), ("second", 31)):
        reports = _reports(alice, laptop, name, 40, batch + 1)
        # The run is running already (its first result moves it out of `queued`).
        assert results_submit(runner=laptop, reports=reports[:1])[0].accepted
        with CaptureQueriesContext(connection) as queries:
            acks = results_submit(runner=laptop, reports=reports[1:])
        assert len(acks) == batch and all(ack.accepted for ack in acks), acks
        sql = [q["sql"] for q in queries.captured_queries]
        counts.append([s for s in sql if "SAVEPOINT" not in s])
    assert [len(c) for c in counts] == [8, 8], "\n\n".join("\n".join(c) for c in counts)
