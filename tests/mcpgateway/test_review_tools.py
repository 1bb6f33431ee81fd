"""Review tools over MCP, through a real server: the queue of what needs a person, a review
through the service the page and REST use (a viewer refused as REST refuses, an outsider told
nothing exists), and the harness list carrying each judge's agreement with people."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model

from accounts.services import api_key_create
from scorecards.models import CaseResult, Membership, Role
from scorecards.review.models import Review
from tests.mcpgateway.mcp_client import call, error_text, structured
from tests.scorecards.test_review import judged_run

pytestmark = pytest.mark.e2e


def test_a_member_walks_the_queue_and_the_harness_says_how_people_agreed(
    gateway: Any, alice: Any, bob: Any, charlie: Any, workspace: Any
) -> None:
    run = judged_run(alice)
    key = api_key_create(user=bob).key

    queue = structured(call(gateway.url, key, "get_review_queue", {"workspace": "acme"}))
    assert queue["remaining"] == 4 and queue["runs"] == [run.pk]
    assert [i["case"] for i in queue["items"]] == ["c0", "c1", "c2", "c3"]
    c0, c1 = queue["items"][0], queue["items"][1]
    assert c0["reasons"] == ["judges split"] and c0["judges"][1]["reason"] == "vote 1"

    confirmed = structured(
        call(gateway.url, key, "review_result", {"result_id": c0["result"], "action": "confirm"})
    )
    assert (confirmed["action"], confirmed["machine_verdict"]) == ("confirm", "pass")
    passed = structured(
        call(
            gateway.url,
            key,
            "review_result",
            {"result_id": c1["result"], "action": "pass", "note": "the answer is right"},
        )
    )
    assert passed["machine_verdict"] == "fail" and passed["by"] == "bob"
    result = CaseResult.objects.get(pk=c1["result"])
    assert (result.verdict, result.grader_verdict) == ("pass", "fail")

    by_run = structured(
        call(gateway.url, key, "get_review_queue", {"workspace": "acme", "run_id": run.pk})
    )
    assert by_run["remaining"] == 2
    assert [r["action"] for r in by_run["reviewed"]] == ["pass", "confirm"]
    # The judges' pass confirmed, their fail overruled: 1 of 2.
    [agreement] = by_run["people_agreement"]
    assert (agreement["agreed"], agreement["reviewed"], agreement["model"]) == (1, 2, "judge-m")
    [harness] = structured(call(gateway.url, key, "list_harnesses", {"workspace": "acme"}))[
        "harnesses"
    ]
    assert harness["name"] == "bulk"
    assert [a["text"] for a in harness["people_agreement"]] == [agreement["text"]]
    assert agreement["text"].startswith("agreed with people on 1 of 2 reviewed, 50 % [")

    dave = get_user_model().objects.create_user("dave")
    Membership.objects.create(workspace=workspace, user=dave, role=Role.VIEWER)
    viewer = api_key_create(user=dave).key
    c2 = queue["items"][2]["result"]
    refused = call(gateway.url, viewer, "review_result", {"result_id": c2, "action": "fail"})
    assert refused.is_error and "member" in error_text(refused).lower()
    outsider = api_key_create(user=charlie).key
    for tool, args in (
        ("review_result", {"result_id": c2, "action": "fail"}),
        ("get_review_queue", {"workspace": "acme"}),
        ("list_harnesses", {"workspace": "acme"}),
    ):
        hidden = call(gateway.url, outsider, tool, args)
        assert hidden.is_error and "not found" in error_text(hidden).lower(), (tool, hidden)
    bad = call(gateway.url, key, "review_result", {"result_id": c2, "action": "maybe"})
    assert bad.is_error
    assert Review.objects.filter(result_id=c2).count() == 0
