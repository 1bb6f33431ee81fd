"""A person's verdict: set with a note by a member, counted in the summary, marked as theirs,
kept over a regrade until withdrawn; refused to viewers (403) and outsiders (404)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from bulk import ECHO, seeded_run
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.services import api_key_create
from core.errors import Invalid
from scorecards.models import CaseResult, Membership, Role, RunStatus, VerdictEntry
from scorecards.selectors.compare import run_compare
from scorecards.selectors.history import harness_runs
from scorecards.services import harness_create
from scorecards.verdicts.regrades import run_regrade
from scorecards.verdicts.services import verdict_set, verdict_withdraw

pytestmark = pytest.mark.django_db

REGEX = {**ECHO, "grader": {"type": "regex"}}


def api(user: Any) -> Client:
    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {api_key_create(user=user).key}"
    return client


@pytest.fixture
def viewer(workspace: Any) -> Any:
    dave = get_user_model().objects.create_user("dave", password="dave-pw")
    Membership.objects.create(workspace=workspace, user=dave, role=Role.VIEWER)
    return dave


@pytest.fixture
def run(alice: Any, workspace: Any) -> Any:
    """Three cases: c1 failed, c0 and c2 passed."""
    return seeded_run(alice, cases=3, verdict=lambda c, r: "fail" if c == 1 else "pass")


def test_a_members_verdict_over_rest_changes_the_summary_and_shows_who_set_it(
    bob: Any, run: Any
) -> None:
    url = f"/api/runs/{run.pk}/verdict?key=c1"

    reply = api(bob).put(url, {"verdict": "pass", "note": "fine"}, "application/json")

    assert reply.status_code == 200, reply.content
    body = reply.json()
    assert body["verdict"] == "pass" and body["summary"]["pass"] == 3
    assert body["person"]["by"] == "bob" and body["person"]["grader_verdict"] == "fail"
    assert body["person"]["note"] == "fine" and body["person"]["at"]
    case = api(bob).get(f"/api/runs/{run.pk}/cases/c1").json()["runs"][0]["result"]
    assert case["person"]["by"] == "bob"
    assert [(h["source"], h["verdict"]) for h in case["history"]] == [
        ("grader", "fail"),
        ("person", "pass"),
    ]
    listed = api(bob).get(f"/api/runs/{run.pk}").json()
    assert listed["summary"]["pass"] == 3
    assert next(r for r in listed["results"] if r["case"] == "c1")["person"]["by"] == "bob"

    withdrawn = api(bob).delete(url)
    assert withdrawn.status_code == 200 and withdrawn.json()["verdict"] == "fail"
    assert withdrawn.json()["person"] is None and withdrawn.json()["summary"]["pass"] == 2
    assert api(bob).delete(url).status_code == 404


def test_who_may_set_a_verdict(alice: Any, bob: Any, charlie: Any, viewer: Any, run: Any) -> None:
    url = f"/api/runs/{run.pk}/verdict?key=c0"
    body = {"verdict": "fail", "note": ""}

    assert api(alice).put(url, body, "application/json").status_code == 200
    assert api(bob).put(url, body, "application/json").status_code == 200
    assert api(viewer).put(url, body, "application/json").status_code == 403
    assert api(viewer).delete(url).status_code == 403
    assert api(charlie).put(url, body, "application/json").status_code == 404
    assert api(charlie).delete(url).status_code == 404
    assert CaseResult.objects.get(run=run, case__key="c0").verdict_by == bob


def test_bad_verdicts_are_clear_4xx(bob: Any, run: Any) -> None:
    base = f"/api/runs/{run.pk}/verdict"

    assert (
        api(bob).put(f"{base}?key=c0", {"verdict": "error"}, "application/json").status_code == 400
    )
    assert (
        api(bob).put(f"{base}?key=c0", {"verdict": "pass", "x": 1}, "application/json").status_code
        == 400
    )
    assert (
        api(bob).put(f"{base}?key=nope", {"verdict": "pass"}, "application/json").status_code == 404
    )
    assert (
        api(bob)
        .put(f"{base}?key=c0", {"verdict": "pass", "repeat": 3}, "application/json")
        .status_code
        == 400
    )


def test_a_persons_verdict_survives_a_regrade_until_withdrawn(
    alice: Any, bob: Any, run: Any
) -> None:
    verdict_set(user=bob, run_id=run.pk, key="c0", verdict="fail", note="wrong tone")
    CaseResult.objects.filter(run=run).update(output="nothing like it")
    regex = harness_create(user=alice, workspace_slug="acme", name="bulk", spec=REGEX)

    done = run_regrade(user=alice, run_id=run.pk, harness_version=regex.version)

    c0 = CaseResult.objects.get(run=run, case__key="c0")
    assert done.kept == 1
    assert (c0.verdict, c0.verdict_by, c0.grader_verdict) == ("fail", bob, "fail")
    entries = list(
        VerdictEntry.objects.filter(result=c0).values_list("source", "verdict", "counted")
    )
    assert entries == [
        ("grader", "pass", True),
        ("person", "fail", True),
        ("regrade", "fail", False),
    ]
    verdict_set(user=bob, run_id=run.pk, key="c2", verdict="pass")
    run_regrade(user=alice, run_id=run.pk)
    assert CaseResult.objects.get(run=run, case__key="c2").verdict == "pass"

    verdict_withdraw(user=alice, run_id=run.pk, key="c2")
    c2 = CaseResult.objects.get(run=run, case__key="c2")
    assert (c2.verdict, c2.verdict_by, c2.grader_verdict) == ("fail", None, "")


def test_a_persons_pass_on_the_only_error_makes_the_run_succeed(
    alice: Any, bob: Any, workspace: Any
) -> None:
    run = seeded_run(alice, cases=2, status=RunStatus.FAILED)
    CaseResult.objects.filter(run=run, case__key="c1").update(verdict="error", error="timed out")

    verdict_set(user=bob, run_id=run.pk, key="c1", verdict="pass", note="slow, but right")
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED

    verdict_withdraw(user=bob, run_id=run.pk, key="c1")
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert CaseResult.objects.get(run=run, case__key="c1").verdict == "error"


def test_the_case_page_shows_the_control_and_the_persons_mark(
    client: Client, bob: Any, viewer: Any, run: Any
) -> None:
    client.force_login(bob)
    page = client.get(f"/runs/{run.pk}/cases/c1/").content.decode()
    assert 'id="verdict-form-0"' in page and "Withdraw" not in page

    reply = client.post(
        f"/runs/{run.pk}/verdict",
        {"key": "c1", "repeat": "0", "verdict": "pass", "note": "reads fine", "action": "set"},
        follow=True,
    )

    page = reply.content.decode()
    assert reply.status_code == 200
    assert "bob's verdict: pass" in page and "the grader says fail" in page
    assert "reads fine" in page and 'data-testid="verdict-history"' in page
    assert "Withdraw" in page
    run_page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "bob's verdict" in run_page

    client.force_login(viewer)
    page = client.get(f"/runs/{run.pk}/cases/c1/").content.decode()
    assert "verdict-form" not in page and "bob's verdict: pass" in page
    refused = client.post(f"/runs/{run.pk}/verdict", {"key": "c1", "verdict": "fail"})
    assert refused.status_code == 302
    assert CaseResult.objects.get(run=run, case__key="c1").verdict == "pass"


def test_the_exports_mark_a_persons_verdict(bob: Any, run: Any) -> None:
    verdict_set(user=bob, run_id=run.pk, key="c1", verdict="pass", note="fine")

    jsonl_reply: Any = api(bob).get(f"/api/runs/{run.pk}/results.jsonl")
    csv_reply: Any = api(bob).get(f"/api/runs/{run.pk}/results.csv")
    jsonl = b"".join(jsonl_reply.streaming_content)
    csv_text = b"".join(csv_reply.streaming_content)

    rows = [json.loads(line) for line in jsonl.decode().splitlines()]
    c1 = next(r for r in rows if r["case"] == "c1")
    assert (c1["verdict"], c1["verdict_by"], c1["grader_verdict"]) == ("pass", "bob", "fail")
    assert next(r for r in rows if r["case"] == "c0")["verdict_by"] is None
    header, *lines = csv_text.decode().splitlines()
    assert header.endswith(",verdict_by,grader_verdict")
    assert any(line.startswith("c1,") and line.endswith(",bob,fail") for line in lines)


def test_a_nul_in_the_key_or_the_note_is_a_clear_4xx(bob: Any, run: Any) -> None:
    base = f"/api/runs/{run.pk}/verdict"

    by_key = api(bob).put(f"{base}?key=c%000", {"verdict": "pass"}, "application/json")
    assert by_key.status_code == 404
    assert api(bob).delete(f"{base}?key=c%000").status_code == 404
    with pytest.raises(Invalid):
        verdict_set(user=bob, run_id=run.pk, key="c0", verdict="pass", note="a\x00b")
    assert CaseResult.objects.filter(run=run, verdict_by__isnull=False).count() == 0


def test_compare_and_history_count_a_persons_verdict(alice: Any, bob: Any, run: Any) -> None:
    baseline = seeded_run(alice, cases=3)
    later = seeded_run(alice, cases=3)

    verdict_set(user=bob, run_id=later.pk, key="c2", verdict="fail", note="hallucinated")

    compared = run_compare(user=alice, a=baseline.pk, b=later.pk)
    assert [c.key for c in compared.changes if c.change == "regressed"] == ["c2"]
    latest = harness_runs(user=alice, workspace_slug="acme", name="bulk")[-1]
    assert (latest.pk, getattr(latest, "n_pass", None)) == (later.pk, 2)
