"""The review queue: what needs a person and why, pass/fail as a person's verdict that the
run's summary counts, confirm as agreement without an override, each judge's agreement with
people; a viewer is refused, an outsider finds nothing, bad input is a clear 400."""

from __future__ import annotations

from typing import Any

import pytest
from bulk import seeded_run
from django.test import Client

from accounts.services import api_key_create
from scorecards.models import CaseResult, Membership, Role
from scorecards.review.models import Review

JUDGE = {"model": "judge-m", "prompt_digest": "d1" * 8, "agreement": "3 of 3 judges"}


def vote(n: int, passed: bool | None, state: str = "readable") -> dict[str, Any]:
    return {"vote": n, "state": state, "pass": passed, "reason": f"vote {n}", "score": None}


def review(client: Client, result: int, body: dict[str, Any]) -> Any:
    return client.post(f"/api/results/{result}/review", body, content_type="application/json")


def api(user: Any) -> Client:
    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {api_key_create(user=user).key}"
    return client


def judged_run(alice: Any) -> Any:
    """c0 judges split (pass), c1 a judge unreadable (fail), c2 an error, c3 tampered, c4
    judged unanimously, c5 plain: four need a person."""
    verdicts = ["pass", "fail", "error", "pass", "pass", "pass"]
    run = seeded_run(alice, cases=6, verdict=lambda c, r: verdicts[c])
    results = {r.case.key: r for r in CaseResult.objects.filter(run=run).select_related("case")}
    split = [vote(0, True), vote(1, False), vote(2, True)]
    unreadable = [vote(0, None, "unreadable"), vote(1, False), vote(2, False)]
    for key, votes in (("c0", split), ("c1", unreadable), ("c4", [vote(0, True)] * 3)):
        results[key].judged_by = {**JUDGE, "votes": votes}
        results[key].save(update_fields=["judged_by"])
    results["c3"].tampered = [{"path": "tests/test_x.py", "change": "modified"}]
    results["c3"].save(update_fields=["tampered"])
    return run


def test_the_queue_reviews_and_the_judges_agreement(
    alice: Any, bob: Any, charlie: Any, workspace: Any
) -> None:
    run = judged_run(alice)
    member = api(bob)
    queue = member.get(f"/api/workspaces/acme/review?run={run.pk}").json()
    assert queue["remaining"] == 4
    assert {i["case"]: i["reasons"] for i in queue["items"]} == {
        "c0": ["judges split"],
        "c1": ["judge's answer unreadable"],
        "c2": ["error"],
        "c3": ["protected files changed"],
    }
    c0, c1 = queue["items"][0], queue["items"][1]
    assert c0["expected"] == "answer 0" and c0["output"] == "answer 0"
    assert [v["reason"] for v in c0["judges"]] == ["vote 0", "vote 1", "vote 2"]
    assert c0["url"] == f"/runs/{run.pk}/cases/c0/"
    assert queue["people_agreement"] == []

    # Confirm: the judges' pass stands, recorded as agreement.
    confirmed = review(member, c0["result"], {"action": "confirm"})
    assert confirmed.status_code == 201, confirmed.content
    assert confirmed.json()["machine_verdict"] == "pass" and confirmed.json()["by"] == "bob"
    # Pass over the judges' fail: a person's verdict, which the summary counts.
    before = member.get(f"/api/runs/{run.pk}").json()["summary"]["pass"]
    passed = review(member, c1["result"], {"action": "pass", "note": "the answer is right"})
    assert passed.status_code == 201, passed.content
    assert member.get(f"/api/runs/{run.pk}").json()["summary"]["pass"] == before + 1
    result = CaseResult.objects.get(pk=c1["result"])
    assert (result.verdict, result.grader_verdict, result.verdict_by) == ("pass", "fail", bob)
    # A note keeps the case in the queue.
    noted = review(member, queue["items"][2]["result"], {"action": "note", "note": "look again"})
    assert noted.status_code == 201

    after = member.get("/api/workspaces/acme/review?harness=bulk").json()
    assert after["remaining"] == 2
    assert [r["action"] for r in after["reviewed"]] == ["note", "pass", "confirm"]
    # One of two agreed: Wilson for 1 of 2 is [0.0945, 0.9055].
    assert after["people_agreement"] == [
        {
            "model": "judge-m",
            "prompt_digest": JUDGE["prompt_digest"],
            "agreed": 1,
            "reviewed": 2,
            "ci": [0.0945, 0.9055],
            "text": "agreed with people on 1 of 2 reviewed, 50 % [9\u201391]",
        }
    ]
    # The harness's reply and its panel on the Harnesses page say the same.
    (harness,) = member.get("/api/workspaces/acme/harnesses").json()
    assert harness["people_agreement"] == after["people_agreement"]
    page = Client()
    page.force_login(bob)
    html = page.get("/w/acme/harnesses/").content.decode()
    assert "agreed with people on 1 of 2 reviewed, 50 % [9\u201391]" in html
    # And the case page, beside the judge's reason.
    case = page.get(f"/runs/{run.pk}/cases/c0/").content.decode()
    assert "this judge agreed with people on 1 of 2 reviewed, 50 % [9\u201391]" in case


def test_who_may_review_and_bad_input(alice: Any, bob: Any, charlie: Any, workspace: Any) -> None:
    run = judged_run(alice)
    viewer = get_viewer(workspace)
    result = CaseResult.objects.get(run=run, case__key="c2").pk
    assert api(viewer).get("/api/workspaces/acme/review").status_code == 200
    refused = review(api(viewer), result, {"action": "confirm"})
    assert refused.status_code == 403
    assert review(api(charlie), result, {"action": "confirm"}).status_code == 404
    assert api(charlie).get("/api/workspaces/acme/review").status_code == 404
    member = api(bob)
    for body in (
        {"action": "approve"},
        {"action": "note", "note": ""},
        {"action": "pass", "note": "a\x00b"},
        {"action": "pass", "note": "x" * 10_000},
    ):
        bad = review(member, result, body)
        assert bad.status_code == 400, (body, bad.content)
    assert member.get("/api/workspaces/acme/review?run=%D9%A3").status_code == 400
    assert review(member, 999999, {"action": "confirm"}).status_code == 404
    assert not Review.objects.exists()


def get_viewer(workspace: Any) -> Any:
    from django.contrib.auth import get_user_model

    viewer = get_user_model().objects.create_user("vera", password="vera-pw")
    Membership.objects.create(workspace=workspace, user=viewer, role=Role.VIEWER)
    return viewer


pytestmark = pytest.mark.django_db
