"""Regrade with a judge grader: judge jobs for the stored outputs on the submitter's runners,
no case run again, the run `running` until they are in, a person's verdict standing."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from runners.models import JobKind, JobStatus, Runner
from scorecards.models import RunStatus, VerdictEntry
from scorecards.services import harness_create
from scorecards.verdicts.regrades import run_regrade
from scorecards.verdicts.services import verdict_set
from tests.scorecards.test_judging import answer, judge, judge_spec, laptop, run_case
from tests.scorecards.test_regrade import api
from tests.suites import ECHO_SPEC, pair, start, suite

pytestmark = pytest.mark.django_db
__all__ = ["laptop"]


def _judged_run(alice: Any, laptop: Runner, *, cases: int = 1) -> Any:
    run = run_case(alice, laptop, cases=cases)
    judge(laptop, answer(True))
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    return run


def test_a_judged_run_is_judged_again_by_judge_jobs_only(
    alice: Any, bob: Any, laptop: Runner
) -> None:
    run = _judged_run(alice, laptop)
    cases_before = run.jobs.filter(kind=JobKind.CASE).count()

    done = run_regrade(user=bob, run_id=run.pk)

    assert (done.regraded, done.kept) == (1, 0)
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.finished_at is None
    assert run.results.get().verdict == "judging"
    queued = run.jobs.filter(status=JobStatus.QUEUED)
    assert [job.kind for job in queued] == [JobKind.JUDGE]
    assert "1 judge jobs queued" in str(run.events.last())

    judge(laptop, answer(False, 0.0, "stricter now"))

    row = run.results.get()
    assert (row.verdict, row.reason) == ("fail", "stricter now")
    history = list(VerdictEntry.objects.filter(result=row).values_list("source", "verdict"))
    assert history == [("grader", "pass"), ("regrade", "fail")]
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED and run.finished_at is not None
    assert run.jobs.filter(kind=JobKind.CASE).count() == cases_before


def test_a_persons_verdict_stands_over_the_judges_of_a_regrade(alice: Any, laptop: Runner) -> None:
    run = _judged_run(alice, laptop)
    verdict_set(user=alice, run_id=run.pk, key="c0", verdict="pass", note="I checked it")

    done = run_regrade(user=alice, run_id=run.pk)
    assert done.kept == 1
    row = run.results.get()
    assert (row.verdict, row.grader_verdict) == ("pass", "judging")

    judge(laptop, answer(False, 0.0, "no greeting"))

    row = run.results.get()
    assert (row.verdict, row.grader_verdict, row.verdict_by) == ("pass", "fail", alice)
    last = VerdictEntry.objects.filter(result=row).last()
    assert last is not None and (last.source, last.verdict, last.counted) == (
        "regrade",
        "fail",
        False,
    )
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED


def test_another_versions_judge_grades_a_deterministic_run(alice: Any, laptop: Runner) -> None:
    suite(alice, spec=ECHO_SPEC, name="judged", cases=1)
    run = start(alice, laptop, harness="judged", dataset="judged")
    from tests.scorecards.test_judging import completed, lease_one, result_submit

    grant = lease_one(laptop)
    result_submit(runner=laptop, job_id=grant.job.pk, lease_epoch=1, result=completed("hi"))
    run.refresh_from_db()
    assert run.status in (RunStatus.SUCCEEDED, RunStatus.FAILED)
    judged = harness_create(user=alice, workspace_slug="acme", name="judged", spec=judge_spec())

    run_regrade(user=alice, run_id=run.pk, harness_version=judged.version)
    judge(laptop, answer(True, 1.0, "greets"))

    run.refresh_from_db()
    assert run.graded_with == judged and run.status == RunStatus.SUCCEEDED
    assert run.results.get().verdict == "pass"


def test_a_judge_regrade_needs_a_runner_of_the_submitter_that_can_judge(
    client: Client, alice: Any, workspace: Any
) -> None:
    plain = pair(alice)
    suite(alice, spec=ECHO_SPEC, name="plain", cases=1)
    run = start(alice, plain, harness="plain", dataset="plain")
    from tests.scorecards.test_judging import completed, lease_one, result_submit

    grant = lease_one(plain)
    result_submit(runner=plain, job_id=grant.job.pk, lease_epoch=1, result=completed("hi"))
    judged = harness_create(user=alice, workspace_slug="acme", name="plain", spec=judge_spec())
    jobs_before = run.jobs.count()

    reply = api(client, alice).post(
        f"/api/runs/{run.pk}/regrade", {"harness_version": judged.version}, "application/json"
    )

    assert reply.status_code == 400, reply.content
    assert "update the runner" in str(reply.json())
    assert run.jobs.count() == jobs_before
