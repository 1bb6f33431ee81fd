"""A run's budget (`max_cost_usd`): the transaction recording the cost that reaches it skips
the cases not started; running ones finish; skipped results are counted apart."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import pytest

from accounts.services import api_key_create
from core.errors import Invalid
from runners import queue
from runners.models import JobStatus
from scorecards.models import Run, RunStatus, Verdict
from scorecards.selectors.summary import run_summary
from scorecards.services import result_submit
from scorecards.services.reruns import run_rerun
from tests.suites import completed, pair, start, suite

pytestmark = pytest.mark.django_db


@pytest.fixture
def laptop(alice: Any, workspace: Any) -> Any:
    suite(alice, cases=6)
    return pair(alice)


def costing(text: str, usd: float) -> Any:
    return completed(text, usage={"total_cost_usd": usd})


def settle(laptop: Any, grant: Any, text: str, usd: float) -> None:
    result_submit(
        runner=laptop,
        job_id=grant.job.pk,
        lease_epoch=grant.job.lease_epoch,
        result=costing(text, usd),
    )


def test_the_cost_that_reaches_the_budget_skips_the_cases_not_started(
    alice: Any, laptop: Any, client: Any
) -> None:
    run = start(alice, laptop, concurrency=2, max_cost_usd=0.03)
    assert run.max_cost_usd == Decimal("0.0300")
    assert "within a run budget of $0.03." in run.events.first().message  # type: ignore[union-attr]
    first, second = queue.job_lease(runner=laptop, max_jobs=2)
    settle(laptop, first, "hello 0", 0.02)  # under: the next case is admitted
    (third,) = queue.job_lease(runner=laptop)
    settle(laptop, second, "hello 1", 0.02)  # $0.04 ≥ $0.03: c3, c4, c5 never start

    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING  # c2 is still running
    skipped = run.results.filter(verdict=Verdict.SKIPPED).order_by("case__key")
    assert [r.case.key for r in skipped] == ["c3", "c4", "c5"]
    assert {(r.reason, r.status, r.score) for r in skipped} == {
        ("run budget $0.03 reached", "skipped", 0.0)
    }
    assert set(run.jobs.filter(status=JobStatus.CANCELED).values_list("case_key", flat=True)) == {
        "c3",
        "c4",
        "c5",
    }
    warning = run.events.filter(level="warning").last()
    assert warning is not None and warning.message == (
        "Run budget $0.03 reached ($0.04 reported): 3 cases not started skipped; 1 running finish."
    )
    assert queue.job_lease(runner=laptop) == []

    settle(laptop, third, "nope", 0.02)  # the running case finishes: the run overshoots
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    summary = run_summary(run)
    assert (summary["pass"], summary["fail"], summary["skipped"]) == (2, 1, 3)
    assert (summary["max_cost_usd"], summary["budget_ended"]) == (0.03, True)
    # Skipped results are in no rate: 2 of the 3 that ran passed.
    assert summary["pass_rate"] == 0.6667
    assert summary["pass_rate_ci"]["skipped"] == 3
    assert summary["cases"] == 3
    messages = list(run.events.values_list("message", flat=True))
    assert messages[-2:] == [
        "Run succeeded: 2 pass, 1 fail, 0 error, 3 skipped.",
        "Ended by its run budget $0.03 reached: $0.06 reported, $0.03 over it — cases "
        "running when it was reached finished.",
    ]
    client.force_login(alice)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Run budget $0.03 — reached: 3 cases not started were skipped" in page
    # Where its status is shown, the run says its budget ended it.
    assert 'id="run-status-detail" class="status st-budget">budget reached</span>' in page
    reply = client.get(f"/api/runs/{run.pk}").json()
    assert (reply["status"], reply["status_detail"]) == ("succeeded", "budget reached")


def test_a_rerun_spends_under_its_parents_budget(alice: Any, laptop: Any, client: Any) -> None:
    run = start(alice, laptop, max_cost_usd=0.03)
    (first,) = queue.job_lease(runner=laptop)
    settle(laptop, first, "nope", 0.04)  # c0 fails and reaches the budget: c1…c5 skipped
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    rerun = run_rerun(user=alice, run_id=run.pk, only="unfinished")
    assert (rerun.parent_id, rerun.max_cost_usd) == (run.pk, Decimal("0.0300"))
    assert sorted(rerun.jobs.values_list("case_key", flat=True)) == ["c1", "c2", "c3", "c4", "c5"]
    (again,) = queue.job_lease(runner=laptop)
    settle(laptop, again, "nope", 0.05)  # its own spend reaches it: its other four skipped
    rerun.refresh_from_db()
    assert run_summary(rerun)["skipped"] == 4 and run_summary(rerun)["budget_ended"]
    client.force_login(alice)
    assert client.get(f"/api/runs/{rerun.pk}").json()["status_detail"] == "budget reached"
    # A run without a budget and its rerun carry none, and say nothing beside their status.
    plain = start(alice, laptop)
    for _ in range(6):
        (grant,) = queue.job_lease(runner=laptop)
        settle(laptop, grant, "nope", 0.5)
    again_plain = run_rerun(user=alice, run_id=plain.pk, only="failed")
    assert again_plain.max_cost_usd is None
    assert client.get(f"/api/runs/{plain.pk}").json()["status_detail"] == ""
    # The runs list says it beside each status too, in its reply and on its page.
    listed = client.get("/api/workspaces/acme/runs").json()["results"]
    assert {r["id"]: r["status_detail"] for r in listed} == {
        run.pk: "budget reached",
        rerun.pk: "budget reached",
        plain.pk: "",
        again_plain.pk: "",
    }
    page = client.get("/w/acme/runs/").content.decode()
    shown = re.findall(r'<tr id="run-(\d+)">.*?</tr>', page, flags=re.S)
    marked = re.findall(
        r'<tr id="run-(\d+)">(?:(?!</tr>).)*data-testid="status-detail"', page, re.S
    )
    assert sorted(map(int, shown)) == sorted([run.pk, rerun.pk, plain.pk, again_plain.pk])
    assert sorted(map(int, marked)) == sorted([run.pk, rerun.pk])
    assert page.count('data-testid="status-detail">budget reached</span>') == 2


def test_a_run_under_its_budget_or_without_one_skips_nothing(alice: Any, laptop: Any) -> None:
    run = start(alice, laptop, max_cost_usd=100)
    for _ in range(6):
        (grant,) = queue.job_lease(runner=laptop)
        settle(laptop, grant, "x", 1.5)
    run.refresh_from_db()
    summary = run_summary(run)
    assert (run.status, summary["skipped"], summary["budget_ended"]) == ("succeeded", 0, False)
    assert summary["cost_usd"] == pytest.approx(9.0)


def test_a_bad_budget_is_a_400_and_nothing_is_stored(alice: Any, laptop: Any, client: Any) -> None:
    for bad in (0, -1, float("nan"), float("inf"), 10**9):
        with pytest.raises(Invalid, match="max_cost_usd"):
            start(alice, laptop, max_cost_usd=bad)
    headers = {"HTTP_AUTHORIZATION": f"Bearer {api_key_create(user=alice).key}"}
    body = {"harness": "echo", "dataset": "echo", "runtime": f"self:{laptop.pk}"}
    sent: tuple[Any, ...] = ("abc", "0", "-2", "1e9", "NaN", True)
    for bad in sent:
        got = client.post(
            "/api/workspaces/acme/runs",
            {**body, "max_cost_usd": bad},
            content_type="application/json",
            **headers,
        )
        assert got.status_code == 400, got.content
        assert "max_cost_usd" in str(got.json())
    assert not Run.objects.exists()
    made = client.post(
        "/api/workspaces/acme/runs",
        {**body, "max_cost_usd": "5"},
        content_type="application/json",
        **headers,
    )
    assert made.status_code == 201, made.content
    assert made.json()["summary"]["max_cost_usd"] == 5.0
    assert Run.objects.get().max_cost_usd == Decimal("5")


def test_compare_pairs_no_skipped_case_and_marks_the_tampered(alice: Any, laptop: Any) -> None:
    from scorecards.replies.compare import CompareReply
    from scorecards.selectors.compare import run_compare

    baseline = start(alice, laptop)
    for _ in range(6):
        (grant,) = queue.job_lease(runner=laptop)
        settle(laptop, grant, f"hello {grant.job.case_key[1:]}", 0.01)
    after = start(alice, laptop, max_cost_usd=0.02)
    for _ in range(2):
        (grant,) = queue.job_lease(runner=laptop)
        settle(laptop, grant, f"hello {grant.job.case_key[1:]}", 0.01)
    # The first case's agent had changed a protected path (as a verifier reports it).
    after.results.filter(case__key="c0").update(
        tampered=[{"path": "tests/test_x.py", "change": "modified"}]
    )
    assert after.results.filter(verdict=Verdict.SKIPPED).count() == 4

    compared = run_compare(user=alice, a=baseline.pk, b=after.pk)
    counts = compared.counts
    # The skipped cases are in no pair: not in both runs, never regressed.
    assert (counts["regressed"], counts["unchanged"], counts["missing"]) == (0, 2, 4)
    assert (counts["tampered_a"], counts["tampered_b"]) == (0, 1)
    assert compared.numbers.significance.pairs == 2
    reply = CompareReply.of(compared).data()
    sides = {item["case"]: item["b"] for item in reply["missing"]}
    assert sides == dict.fromkeys(["c2", "c3", "c4", "c5"])
    [c0] = [c for c in compared.changes if c.key == "c0"]
    assert c0.b is not None and c0.b.tampered == 1 and c0.a is not None and c0.a.tampered == 0


def test_the_new_run_form_takes_a_budget(alice: Any, laptop: Any, client: Any) -> None:
    client.force_login(alice)
    form = {"harness": "echo", "dataset": "echo", "runtime": f"self:{laptop.pk}"}
    page = client.get("/w/acme/runs/new")
    assert b'name="max_cost_usd"' in page.content
    refused = client.post("/w/acme/runs/new", {**form, "concurrency": 1, "max_cost_usd": "-1"})
    assert refused.status_code == 400 and not Run.objects.exists()
    made = client.post("/w/acme/runs/new", {**form, "concurrency": 1, "max_cost_usd": "0.25"})
    run = Run.objects.get()
    assert made.status_code == 302 and made["Location"] == f"/runs/{run.pk}/"
    assert run.max_cost_usd == Decimal("0.25")
    assert b"Run budget $0.25</p>" in client.get(f"/runs/{run.pk}/").content
