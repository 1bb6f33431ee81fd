"""Run tools over MCP: the REST replies item for item, the bare cursor, and nothing for an
outsider."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from bulk import seeded_run

from accounts.services import api_key_create
from runners import queue
from scorecards.models import Run
from scorecards.services import result_submit
from tests.mcpgateway.mcp_client import call, error_text, rest, structured
from tests.suites import completed, pair, start, suite

pytestmark = pytest.mark.e2e


@pytest.fixture
def key(alice: Any, workspace: Any) -> str:
    return api_key_create(user=alice, name="agent").key


def test_results_and_runs_page_with_the_bare_cursor_rest_also_takes(
    gateway: Any, alice: Any, key: str
) -> None:
    run = seeded_run(alice, cases=250, verdict=lambda c, r: "fail" if c % 2 else "pass")

    got = structured(call(gateway.url, key, "get_run", {"run_id": run.pk}))
    page = structured(
        call(gateway.url, key, "list_results", {"run_id": run.pk, "cursor": got["next_cursor"]})
    )
    last = structured(
        call(gateway.url, key, "list_results", {"run_id": run.pk, "cursor": page["next_cursor"]})
    )
    failures = structured(
        call(gateway.url, key, "list_results", {"run_id": run.pk, "verdict": "fail", "limit": 5})
    )
    status, over_rest = rest(
        gateway.url, "GET", f"/api/runs/{run.pk}/results?cursor={quote(got['next_cursor'])}", key
    )

    assert len(got["results"]) == 100 and got["summary"]["total"] == 250
    assert got["results_next"].endswith(
        f"/api/runs/{run.pk}/results?cursor={quote(got['next_cursor'])}"
    )
    assert [r["seq"] for r in page["results"]] == list(range(101, 201))
    assert [r["seq"] for r in last["results"]] == list(range(201, 251))
    assert last["next_cursor"] is None
    assert status == 200 and over_rest["results"] == page["results"]
    assert [r["case"] for r in failures["results"]] == ["c1", "c3", "c5", "c7", "c9"]

    runs = structured(call(gateway.url, key, "list_runs", {"workspace": "acme"}))
    assert [r["id"] for r in runs["runs"]] == [run.pk]
    assert runs["runs"][0]["settled"] == 250


def test_start_compare_rerun_and_cancel_over_mcp(gateway: Any, alice: Any, key: str) -> None:
    suite(alice, cases=2)
    laptop = pair(alice)
    started = structured(
        call(
            gateway.url,
            key,
            "start_run",
            {
                "workspace": "acme",
                "harness": "echo",
                "dataset": "echo",
                "runtime": f"self:{laptop.pk}",
                "repeats": 2,
                "metadata": {"git_sha": "f00d"},
                "max_cost_usd": 0.5,
            },
        )
    )
    assert started["repeats"] == 2 and started["summary"]["total"] == 4
    assert started["summary"]["max_cost_usd"] == 0.5
    assert not started["summary"]["budget_ended"] and started["status_detail"] == ""
    assert started["metadata"] == {"git_sha": "f00d"}
    canceled = structured(call(gateway.url, key, "cancel_run", {"run_id": started["id"]}))
    assert canceled["status"] == "canceled"
    rerun = structured(
        call(gateway.url, key, "rerun", {"run_id": started["id"], "only": "unfinished"})
    )
    assert rerun["parent"] == started["id"] and rerun["summary"]["total"] == 4
    assert rerun["summary"]["max_cost_usd"] == 0.5  # the parent's budget
    refused = call(gateway.url, key, "compare_runs", {"b": rerun["id"]})
    assert refused.is_error and "no earlier finished run" in error_text(refused).lower()
    compared = structured(
        call(gateway.url, key, "compare_runs", {"a": started["id"], "b": rerun["id"]})
    )
    assert compared["a"]["id"] == started["id"] and compared["regressions"] == []
    assert (compared["page"], compared["pages"], compared["next_page"]) == (1, 1, None)
    beyond = call(
        gateway.url, key, "compare_runs", {"a": started["id"], "b": rerun["id"], "page": 2}
    )
    assert beyond.is_error and "pages are numbered 1 to 1" in error_text(beyond)


def test_get_run_says_the_budget_ended_the_run(gateway: Any, alice: Any, key: str) -> None:
    suite(alice, cases=3)
    laptop = pair(alice)
    run = start(alice, laptop, max_cost_usd=0.01)
    (grant,) = queue.job_lease(runner=laptop)
    result = completed("hello 0", usage={"total_cost_usd": 0.02})
    result_submit(
        runner=laptop, job_id=grant.job.pk, lease_epoch=grant.job.lease_epoch, result=result
    )
    got = structured(call(gateway.url, key, "get_run", {"run_id": run.pk}))
    assert (got["status"], got["status_detail"]) == ("succeeded", "budget reached")
    assert got["summary"]["skipped"] == 2
    plain = start(alice, laptop)
    listed = structured(call(gateway.url, key, "list_runs", {"workspace": "acme"}))
    details = {r["id"]: r["status_detail"] for r in listed["runs"]}
    assert details == {run.pk: "budget reached", plain.pk: ""}


def test_an_outsider_gets_not_found_from_every_run_tool(
    gateway: Any, alice: Any, charlie: Any, key: str
) -> None:
    run = seeded_run(alice, cases=2, verdict=lambda c, r: "fail")
    outsider = api_key_create(user=charlie).key
    calls: list[tuple[str, dict[str, Any]]] = [
        ("get_run", {"run_id": run.pk}),
        ("list_results", {"run_id": run.pk}),
        ("list_runs", {"workspace": "acme"}),
        ("compare_runs", {"b": run.pk}),
        ("rerun", {"run_id": run.pk, "only": "failed"}),
        ("cancel_run", {"run_id": run.pk}),
    ]
    for tool, args in calls:
        result = call(gateway.url, outsider, tool, args)
        assert result.is_error and "not found" in error_text(result).lower(), tool


def test_a_misspelt_argument_is_a_tool_error_not_a_silent_default(
    gateway: Any, alice: Any, key: str
) -> None:
    suite(alice, cases=2)
    laptop = pair(alice)
    args: dict[str, Any] = {"workspace": "acme", "harness": "echo", "dataset": "echo"}
    args |= {"runtime": f"self:{laptop.pk}", "repeat": 3}

    result = call(gateway.url, key, "start_run", args)

    assert result.is_error and "repeat" in error_text(result)
    assert not Run.objects.exists()
