"""A job's log is bounded: past its line or byte bound nothing more is kept, and one marker
line says how many were dropped, its count kept current — for report_case_log and for a
result's log_tail alike."""

from __future__ import annotations

from typing import Any

import pytest

from runners import queue
from runners.models import JobLogLine, RunnerJob
from scorecards.services import result_submit
from tests.suites import completed, pair, start, suite

pytestmark = pytest.mark.django_db


@pytest.fixture
def grant(alice: Any, workspace: Any, settings: Any) -> Any:
    settings.EVERDICT_MAX_LOG_LINES_PER_JOB = 5
    settings.EVERDICT_MAX_LOG_BYTES_PER_JOB = 1000
    suite(alice)
    laptop = pair(alice)
    start(alice, laptop)
    return queue.job_lease(runner=laptop)[0]


def log(grant: Any, lines: list[str]) -> None:
    ack = queue.job_report_log(
        runner=grant.job.leased_by, job_id=grant.job.pk, lease_epoch=1, lines=lines
    )
    assert ack.accepted


def lines_of(grant: Any) -> list[str]:
    return list(JobLogLine.objects.filter(job_id=grant.job.pk).values_list("line", flat=True))


def test_past_the_line_bound_one_marker_counts_what_was_dropped(grant: Any) -> None:
    log(grant, ["one", "two", "three"])
    log(grant, ["four", "five", "six", "seven"])
    assert lines_of(grant)[:5] == ["one", "two", "three", "four", "five"]
    assert lines_of(grant)[5].startswith("… 2 lines dropped")
    log(grant, ["eight"] * 10)
    assert len(lines_of(grant)) == 6
    assert lines_of(grant)[5].startswith("… 12 lines dropped")
    job = RunnerJob.objects.get(pk=grant.job.pk)
    assert (job.log_kept, job.log_dropped) == (5, 12)
    assert job.log_bytes == len("onetwothreefourfive")


def test_past_the_byte_bound_nothing_more_is_kept(grant: Any) -> None:
    log(grant, ["x" * 600, "y" * 600, "z"])
    assert lines_of(grant)[0] == "x" * 600
    assert lines_of(grant)[1].startswith("… 2 lines dropped")
    # Once anything is dropped, nothing more is kept, even what would still fit.
    log(grant, ["small"])
    assert len(lines_of(grant)) == 2 and lines_of(grant)[1].startswith("… 3 lines dropped")


def test_a_results_log_tail_counts_against_the_same_bounds(grant: Any) -> None:
    log(grant, ["one", "two", "three", "four"])
    ack = result_submit(
        runner=grant.job.leased_by,
        job_id=grant.job.pk,
        lease_epoch=1,
        result=completed("hello 0", log_tail=["exit 0", "done in 5 ms"]),
    )
    assert ack.accepted
    assert lines_of(grant)[4:] == [
        "exit 0",
        "… 1 line dropped: this case's log is over its bound (5 lines, 1000 bytes)",
    ]
