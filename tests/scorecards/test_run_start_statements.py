"""Starting a run runs a fixed set of statements, whatever the number of cases, and writes
the same rows as ever: the run, its jobs in order (the first `concurrency` queued) with what
they share in one batch, the pinned runner, the provenance a runner is sent, its events."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from core.errors import Invalid, NotFound
from runnercli.protocol import HarnessSpec
from runners import queue
from runners.models import JobBatch, JobStatus, RunnerJob
from scorecards.models import Case, DatasetVersion, Run, RunEvent, RunStatus
from scorecards.services import harness_create, run_start
from tests.suites import ECHO_SPEC, pair, start, suite

pytestmark = pytest.mark.django_db

# SAVEPOINT (the test's transaction stands for BEGIN), the reads, the run, the jobs, the
# events, RELEASE. On PostgreSQL a dispatch of up to 64 jobs is one statement: the run, its
# events, its cases read and its jobs parked with their batch and wake-up. A larger one reads
# its cases with the run's insert, then parks the jobs with a batch and wake-up statement and
# one COPY, which Django's statement log does not show. On SQLite the run, events and cases
# are three statements and the jobs two.
STATEMENTS = {"postgresql": 4, "sqlite": 8}
LARGE = {"postgresql": 5, "sqlite": 8}


def _statements(user: Any, runner: Any | None, name: str, cases: int, **kwargs: Any) -> list[str]:
    suite(user, cases=cases, name=name)
    with CaptureQueriesContext(connection) as queries:
        start(user, runner, harness=name, dataset=name, **kwargs)
    return [q["sql"] for q in queries.captured_queries]


@pytest.mark.parametrize("pinned", [True, False], ids=["self:<id>", "self:any"])
def test_a_1_case_run_and_a_50_case_run_start_in_the_same_statements(
    alice: Any, workspace: Any, pinned: bool
) -> None:
    laptop = pair(alice)
    runner = laptop if pinned else None
    one = _statements(alice, runner, "one", 1)
    fifty = _statements(alice, runner, "fifty", 50, concurrency=8)
    assert len(one) == STATEMENTS[connection.vendor], "\n".join(one)
    assert len(fifty) == len(one), "\n".join(fifty)
    many = _statements(alice, runner, "many", 100, repeats=2)
    assert len(many) == LARGE[connection.vendor], "\n".join(many)
    more = _statements(alice, runner, "more", 400, repeats=3)
    assert len(more) == len(many), "\n".join(more)


@pytest.mark.parametrize("cases", [3, 40], ids=["one-statement", "copy"])
def test_a_started_run_has_its_jobs_in_order_with_their_provenance(
    alice: Any, workspace: Any, cases: int
) -> None:
    laptop = pair(alice)
    suite(alice, cases=cases, name="s")
    odd = {"text": "naïve ☃", "n": [1, 2.5, None, True], "deep": {"x": {"y": ""}}}
    Case.objects.filter(key="c1").update(hidden_files={"tests/test_hidden.py": "assert 1\n"})
    Case.objects.filter(key="c2").update(input=odd, hidden_files={})
    run = start(alice, laptop, harness="s", dataset="s", concurrency=2, repeats=2)
    stored = Run.objects.get(pk=run.pk)
    assert (stored.runner_id, stored.submitted_by_id, stored.status) == (
        laptop.pk,
        alice.pk,
        RunStatus.QUEUED,
    )
    assert (stored.harness.name, stored.dataset.name, stored.concurrency, stored.repeats) == (
        "s",
        "s",
        2,
        2,
    )
    keys = list(
        Case.objects.filter(dataset=stored.dataset).order_by("position").values_list("key", "input")
    )
    jobs = list(RunnerJob.objects.filter(run=run).order_by("seq"))
    assert [(j.seq, j.case_key, j.repeat) for j in jobs] == [
        (seq, key, seq // cases) for seq, (key, _) in enumerate(keys + keys)
    ]
    assert [j.status for j in jobs] == [JobStatus.QUEUED] * 2 + [JobStatus.PENDING] * (
        2 * cases - 2
    )
    assert all((j.queued_at is not None) == (j.seq < 2) for j in jobs)
    assert {(j.owner_id, j.runner_id, j.batch_id) for j in jobs} == {
        (alice.pk, laptop.pk, jobs[0].batch_id)
    }
    hidden = dict(Case.objects.filter(dataset=stored.dataset).values_list("key", "hidden_files"))
    assert [j.payload for j in jobs] == [
        {"repeat": j.repeat, "case": {"key": j.case_key, "input": dict(keys)[j.case_key]}}
        | ({"hidden": hidden[j.case_key]} if hidden[j.case_key] else {})
        for j in jobs
    ]
    assert (jobs[2].payload["case"]["input"], "hidden" in jobs[1].payload) == (odd, True)
    # The claim walks a dispatch's jobs (one creation time) by id: in their order.
    assert [j.pk for j in jobs] == sorted(j.pk for j in jobs)
    assert len({j.created_at for j in jobs}) == 1
    assert (
        jobs[0].required_capabilities
        == HarnessSpec.model_validate(ECHO_SPEC).required_capabilities()
    )
    shared = JobBatch.objects.get(pk=jobs[0].batch_id).payload
    assert (shared["run_id"], shared["workspace"], shared["submitted_by"]) == (
        run.pk,
        "acme",
        "alice",
    )
    assert (shared["harness"]["name"], shared["harness"]["version"]) == ("s", 1)
    assert shared["harness"]["author"] == "alice"
    assert len(shared["harness"]["digest"]) == 64
    leased = queue.job_lease(runner=laptop, max_jobs=8)
    assert [(g.case_job.case.key, g.case_job.repeat) for g in leased] == [
        (keys[0][0], 0),
        (keys[1][0], 0),
    ]
    assert leased[0].case_job.harness.spec.command == ECHO_SPEC["command"]
    said = list(RunEvent.objects.filter(run=run).values_list("level", "message"))
    assert said[0] == (
        "info",
        f"Dispatched {cases} cases, 2 times each of s v1 over s v1 "
        f"to runner laptop (#{laptop.pk}).",
    )
    assert [e.pk for e in run.dispatched.events] == list(
        RunEvent.objects.filter(run=run).order_by("id").values_list("id", flat=True)
    )


def test_any_runner_pins_none_and_says_an_offline_runner(alice: Any, workspace: Any) -> None:
    pair(alice)
    suite(alice, cases=2)
    run = start(alice, None)
    assert Run.objects.get(pk=run.pk).runner_id is None
    assert set(RunnerJob.objects.filter(run=run).values_list("runner_id", flat=True)) == {None}
    said = list(RunEvent.objects.filter(run=run).order_by("id").values_list("level", "message"))
    assert said == [
        ("info", "Dispatched 2 cases of echo v1 over echo v1 to any of the submitter's runners."),
        ("warning", "Runner laptop is offline — start it with `python -m runnercli run`"),
    ]


def test_a_rerun_of_named_cases_queues_only_those(alice: Any, workspace: Any) -> None:
    laptop = pair(alice)
    suite(alice, cases=5)
    run = start(alice, laptop, case_keys=["c3", "c1", "nope"])
    assert list(RunnerJob.objects.filter(run=run).order_by("seq").values_list("case_key")) == [
        ("c1",),
        ("c3",),
    ]
    empty = start(alice, laptop, case_keys=[])
    assert not RunnerJob.objects.filter(run=empty).exists()
    assert Run.objects.get(pk=empty.pk).is_terminal


def test_what_a_start_refuses_writes_nothing(
    alice: Any, bob: Any, charlie: Any, workspace: Any
) -> None:
    laptop = pair(alice)
    suite(alice, cases=2)
    with pytest.raises(NotFound, match="Workspace not found"):
        start(charlie, None)
    with pytest.raises(NotFound, match="Harness 'nope' not found"):
        start(alice, laptop, harness="nope")
    with pytest.raises(NotFound, match="Harness 'echo' v9 not found"):
        start(alice, laptop, harness_version=9)
    with pytest.raises(NotFound, match="Dataset 'nope' not found"):
        start(alice, laptop, dataset="nope")
    with pytest.raises(NotFound, match=r"Runner \d+ not found among your runners"):
        start(bob, laptop)
    with pytest.raises(NotFound, match="You have no runners"):
        start(bob, None)
    with pytest.raises(Invalid, match="Unknown runtime"):
        run_start(
            user=alice, workspace_slug="acme", harness="echo", dataset="echo", runtime="self:x"
        )
    harness_create(
        user=alice,
        workspace_slug="acme",
        name="echo",
        spec={**ECHO_SPEC, "capabilities": ["gpu"]},
    )
    with pytest.raises(Invalid, match="lacks the capabilities"):
        start(alice, laptop)
    assert not Run.objects.exists()
    assert not RunnerJob.objects.exists()
    assert not JobBatch.objects.exists()


def test_a_version_miscounting_its_cases_still_says_what_was_dispatched(
    alice: Any, workspace: Any
) -> None:
    laptop = pair(alice)
    suite(alice, cases=3)
    DatasetVersion.objects.update(case_count=5)  # written with the run: says 5, then 3
    run = start(alice, laptop)
    assert RunnerJob.objects.filter(run=run).count() == 3
    said = list(RunEvent.objects.filter(run=run).order_by("id").values_list("message", flat=True))
    assert said[0] == f"Dispatched 3 cases of echo v1 over echo v1 to runner laptop (#{laptop.pk})."
    assert said[1].startswith("Runner laptop is offline")
    assert [e.message for e in run.dispatched.events] == said
