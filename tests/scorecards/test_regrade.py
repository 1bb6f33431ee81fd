"""Regrade without rerunning: a finished run's stored outputs scored again on the server, by
its grader or another version's, with no job leased; earlier verdicts kept in the history."""

from __future__ import annotations

from typing import Any

import pytest
from bulk import ECHO, seeded_run
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.services import api_key_create
from runners.models import JobAttempt, RunnerJob
from scorecards.models import CaseResult, Membership, Role, Run, RunStatus, VerdictEntry
from scorecards.selectors.compare import run_compare
from scorecards.selectors.history import harness_runs
from scorecards.services import harness_create
from scorecards.verdicts.regrades import run_regrade

pytestmark = pytest.mark.django_db

REGEX = {**ECHO, "grader": {"type": "regex"}}


def api(client: Client, user: Any) -> Client:
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {api_key_create(user=user).key}"
    return client


def _wrong_when_odd(case: int, repeat: int) -> str:
    return f"wrong {case}" if case % 2 else f"answer {case}"


def _queue(run: Run) -> list[tuple[Any, ...]]:
    return list(
        RunnerJob.objects.filter(run=run)
        .order_by("pk")
        .values_list("pk", "status", "lease_epoch", "attempts", "leased_by_id")
    )


@pytest.fixture
def viewer(workspace: Any) -> Any:
    dave = get_user_model().objects.create_user("dave", password="dave-pw")
    Membership.objects.create(workspace=workspace, user=dave, role=Role.VIEWER)
    return dave


def test_a_changed_regex_grader_rescores_1000_stored_results_without_leasing_a_job(
    alice: Any, bob: Any, workspace: Any
) -> None:
    run = seeded_run(alice, cases=1000, output=_wrong_when_odd)
    regex = harness_create(user=alice, workspace_slug="acme", name="bulk", spec=REGEX)
    queue_before = _queue(run)

    # How fast: bench/grading.py, beside grading the same outputs in memory.
    done = run_regrade(user=bob, run_id=run.pk, harness_version=regex.version)

    assert (done.regraded, done.changed, done.kept) == (1000, 500, 0)
    assert done.summary["pass"] == 500 and done.summary["fail"] == 500
    assert _queue(run) == queue_before
    assert not JobAttempt.objects.filter(job__run=run).exists()
    run.refresh_from_db()
    assert run.graded_with == regex and run.regraded_at is not None
    assert run.status == RunStatus.SUCCEEDED
    odd = CaseResult.objects.get(run=run, case__key="c1")
    assert odd.verdict == "fail" and "does not match" in odd.reason
    history = list(VerdictEntry.objects.filter(result=odd).values_list("source", "verdict"))
    assert history == [("grader", "pass"), ("regrade", "fail")]
    assert not VerdictEntry.objects.filter(result__case__key="c0", result__run=run).exists()
    assert "Regraded by bob with bulk v2" in str(run.events.last())


def test_compare_and_history_read_the_current_verdicts(alice: Any, workspace: Any) -> None:
    baseline = seeded_run(alice, cases=4)
    run = seeded_run(alice, cases=4, output=_wrong_when_odd)
    regex = harness_create(user=alice, workspace_slug="acme", name="bulk", spec=REGEX)

    assert run_compare(user=alice, a=baseline.pk, b=run.pk).counts["regressed"] == 0
    run_regrade(user=alice, run_id=run.pk, harness_version=regex.version)

    assert run_compare(user=alice, a=baseline.pk, b=run.pk).counts["regressed"] == 2
    latest = harness_runs(user=alice, workspace_slug="acme", name="bulk")[-1]
    assert (latest.pk, getattr(latest, "n_pass", None)) == (run.pk, 2)


def test_regrade_over_rest_for_members_and_clear_refusals(
    client: Client, alice: Any, bob: Any, charlie: Any, viewer: Any, workspace: Any
) -> None:
    run = seeded_run(alice, cases=3, output=_wrong_when_odd)
    regex = harness_create(user=alice, workspace_slug="acme", name="bulk", spec=REGEX)
    url = f"/api/runs/{run.pk}/regrade"

    def post(user: Any, body: dict[str, Any]) -> Any:
        return api(Client(), user).post(url, body, content_type="application/json")

    done = post(bob, {"harness_version": regex.version})
    assert done.status_code == 200, done.content
    assert done.json()["changed"] == 1 and done.json()["summary"]["fail"] == 1
    assert done.json()["grader"] == {"name": "bulk", "version": 2}
    assert post(bob, {"harness_version": 9}).status_code == 404
    assert "no version 9" in post(bob, {"harness_version": 9}).json()["detail"]
    other = post(bob, {"harness": "echo", "harness_version": 1})
    assert other.status_code == 400 and "ran harness 'bulk'" in str(other.json())
    assert post(bob, {"harness_versoin": 2}).status_code == 400
    assert post(charlie, {}).status_code == 404
    assert post(viewer, {}).status_code == 403
    again = post(alice, {})
    assert again.status_code == 200 and again.json()["grader"]["version"] == 2
    assert again.json()["changed"] == 0


def test_a_run_not_yet_ended_is_refused_a_regrade(alice: Any, workspace: Any) -> None:
    run = seeded_run(alice, cases=2, status=RunStatus.RUNNING)

    reply = api(Client(), alice).post(f"/api/runs/{run.pk}/regrade", {}, "application/json")

    assert reply.status_code == 409 and "once it has ended" in reply.json()["detail"]
