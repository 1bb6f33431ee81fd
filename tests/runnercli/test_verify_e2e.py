"""End to end, a verified case: daphne, the scheduler and `python -m runnercli run` as real
processes, a real git checkout of a small Python project with a bug and its pytest tests, the
verifier running pytest with a JUnit report, scripted agents as the harness's command.

One run, one runner session: the agent that fixes the bug passes with score 1; the one that
edits the test to expect a wrong value is tampered and fails, the verifier having run the
restored test; the one that plants a `conftest.py` making every test pass is tampered; hidden
tests the agent provably never saw (it lists its worktree, its environment and its case file)
decide the verdict; a listed `fail_to_pass` test is named in the reason when it fails. The
member's checkout is untouched and no worktree is left.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from accounts.services import api_key_create
from runners.models import JobAttempt
from scorecards.models import CaseResult
from scorecards.services import dataset_create, harness_create
from tests.live import daphne, scheduler
from tests.runnercli.gitrepos import git, snapshot, worktree_paths
from tests.runnercli.test_e2e import Api
from tests.runnercli.test_repo_e2e import case_dirs, map_and_pair, start_runner
from tests.runnercli.verifyrepo import DISPATCH, HIDDEN_TEST, PROTECT, VERIFY, make_project

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

NAME = "acme/app"  # the name `map_and_pair` maps the checkout under
LISTED = {
    "fail_to_pass": ["tests/test_calc.py::test_add"],
    "pass_to_pass": ["tests/test_calc.py::test_zero"],
}


@pytest.fixture
def api(workspace: Any, alice: Any, tmp_path: Path) -> Iterator[Api]:
    env = {"EVERDICT_LEASE_TTL_S": 5, "EVERDICT_QUEUE_IDLE_TIMEOUT_S": 120}
    with daphne(tmp_path, **env) as server, scheduler(tmp_path, **env):
        yield Api(server, api_key_create(user=alice, name="e2e").key)


def test_the_verifier_decides_tampering_fails_and_hidden_tests_stay_hidden(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    checkout = tmp_path / "member" / "calc"
    make_project(checkout)
    before = snapshot(checkout)
    script = tmp_path / "agent.py"
    script.write_text(DISPATCH)
    harness_create(
        user=alice,
        workspace_slug="acme",
        name="verified",
        spec={
            "command": [sys.executable, str(script)],
            "timeout_s": 60,
            "capabilities": ["python"],
            "repo": {"name": NAME, "ref": "head"},
            "protect": PROTECT,
            "verify": VERIFY,
            "grader": {"type": "verify"},
        },
    )
    hidden = {"tests/test_hidden.py": HIDDEN_TEST}
    dataset_create(
        user=alice,
        workspace_slug="acme",
        name="calc",
        cases=[
            {"key": "fix", "input": {"agent": "fix"}, "tests": LISTED},
            {"key": "edit", "input": {"agent": "edit"}, "tests": LISTED},
            {"key": "plant", "input": {"agent": "plant"}},
            {"key": "idle", "input": {"agent": "idle"}, "tests": LISTED},
            {
                "key": "hidden",
                "input": {"agent": "look"},
                "hidden_files": hidden,
                "tests": {"fail_to_pass": ["tests/test_hidden.py::test_hidden_negative"]},
            },
        ],
    )
    runner_id = map_and_pair(api, tmp_path, checkout)
    runner = start_runner(tmp_path, "laptop", "--max-concurrent", "2")
    try:
        body = {"harness": "verified", "dataset": "calc", "runtime": f"self:{runner_id}"}
        run_id = int(api.ok("POST", "/api/workspaces/acme/runs", body)["id"])
        run = api.wait_run(run_id, timeout=120)
    finally:
        assert runner.stop(signal.SIGTERM) == 0, runner.output()

    results = {r["case"]: r for r in run["results"]}
    rows = {row.case.key: row for row in CaseResult.objects.filter(run_id=run_id)}
    said: dict[str, Any] = {key: row.verify for key, row in rows.items()}
    verdicts = {key: (r["verdict"], r["score"]) for key, r in results.items()}
    assert verdicts == {
        "fix": ("pass", 1.0),
        "edit": ("fail", 0.0),
        "plant": ("fail", 0.0),
        "idle": ("fail", 0.5),
        "hidden": ("pass", 1.0),
    }, {key: r["reason"] for key, r in results.items()}
    assert results["fix"]["reason"] == "all 2 listed tests passed"
    assert rows["fix"].tampered == []
    assert results["edit"]["reason"] == (
        "the agent changed protected paths: tests/test_calc.py (modified)"
    )
    # The verifier ran the restored test: it fails on the bug the agent left.
    assert said["edit"]["outcome"]["tests"]["failed"] == ["tests.test_calc.test_add"]
    assert results["plant"]["reason"] == ("the agent changed protected paths: conftest.py (added)")
    assert said["plant"]["outcome"]["tests"]["failed"] == ["tests.test_calc.test_add"]
    assert results["idle"]["reason"] == (
        "1 of 2 listed tests failing: fail_to_pass tests/test_calc.py::test_add (failed)"
    )
    seen = json.loads(rows["hidden"].output)
    assert seen["saw_hidden"] is False
    assert not any("test_hidden" in name for name in seen["files"])
    assert (
        "tests.test_hidden.test_hidden_negative" in (said["hidden"]["outcome"]["tests"]["passed"])
    )
    for key, row in rows.items():
        assert row.phases is not None and row.phases["verify_s"] > 0, key
        assert "passed" in said[key]["stdout_tail"] or "failed" in said[key]["stdout_tail"]

    # The case's reply and page show the verifier, its failing tests first, and the tampering;
    # the run's results mark the tampered ones.
    edited = api.ok("GET", f"/api/runs/{run_id}/cases/edit")
    shown = edited["runs"][0]["result"]
    assert shown["tampered"] == [{"path": "tests/test_calc.py", "change": "modified"}]
    assert shown["tests"][0] == {"name": "tests.test_calc.test_add", "state": "failed"}
    assert shown["phases"]["verify_s"] > 0
    assert [r["case"] for r in run["results"] if r["tampered"]] == sorted(
        ["edit", "plant"], key=[r["case"] for r in run["results"]].index
    )
    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/runs/{run_id}/cases/edit/").content.decode()
    assert 'data-testid="tampered"' in page and "tests/test_calc.py" in page
    assert 'data-testid="verify-tests"' in page and 'data-testid="phases"' in page
    run_page = browser.get(f"/runs/{run_id}/").content.decode()
    assert run_page.count('data-testid="tampered"') == 2
    assert "2 results whose agent changed protected paths" in run_page
    assert 'data-testid="run-phases"' in run_page
    assert run["summary"]["tampered"] == 2 and run["summary"]["phases"]["verify_s"] > 0
    # The exports carry them too.
    jsonl_reply: Any = browser.get(f"/api/runs/{run_id}/results.jsonl")
    exported = b"".join(jsonl_reply.streaming_content)
    lines = {row["case"]: row for row in map(json.loads, exported.decode().splitlines())}
    assert lines["plant"]["tampered"] == [{"path": "conftest.py", "change": "added"}]
    assert lines["fix"]["tampered"] == [] and lines["fix"]["phases"]["verify_s"] > 0
    csv_reply: Any = browser.get(f"/api/runs/{run_id}/results.csv")
    table = b"".join(csv_reply.streaming_content)
    assert "tests/test_calc.py (modified)" in table.decode()

    assert snapshot(checkout) == before
    assert git(checkout, "status", "--porcelain") == ""
    assert worktree_paths(checkout) == []
    assert case_dirs(tmp_path) == []


# The agent counts its runs; the verifier counts its own and, the first time, says it is
# running and waits (ending when its runner is gone: it is orphaned, its parent changes).
COUNTED_AGENT = """
import os, sys
with open(sys.argv[1], "a") as f:
    f.write(f"{os.getpid()}\\n")
print("done")
"""
HELD_VERIFIER = """
import os, sys, time
count, inside = sys.argv[1], sys.argv[2]
runs = open(count).read().split() if os.path.exists(count) else []
with open(count, "a") as f:
    f.write(f"{os.getpid()}\\n")
if not runs:
    parent = os.getppid()
    open(inside, "w").close()
    given_up = time.monotonic() + 60
    while os.getppid() == parent and time.monotonic() < given_up:
        time.sleep(0.05)
    sys.exit(1)
"""


def test_a_runner_killed_during_the_verifier_runs_the_case_whole_on_the_next_attempt(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    checkout = tmp_path / "member" / "calc"
    make_project(checkout)
    before = snapshot(checkout)
    agent, verifier = tmp_path / "agent.py", tmp_path / "verifier.py"
    agent.write_text(COUNTED_AGENT)
    verifier.write_text(HELD_VERIFIER)
    agents, verifies, inside = (tmp_path / n for n in ("agent.count", "verify.count", "inside"))
    harness_create(
        user=alice,
        workspace_slug="acme",
        name="held",
        spec={
            "command": [sys.executable, str(agent), str(agents)],
            "timeout_s": 60,
            "capabilities": ["python"],
            "repo": {"name": NAME, "ref": "head"},
            "verify": {
                "command": [sys.executable, str(verifier), str(verifies), str(inside)],
                "timeout_s": 60,
                "output": "exit_code",
            },
            "grader": {"type": "verify"},
        },
    )
    dataset_create(user=alice, workspace_slug="acme", name="one", cases=[{"key": "only"}])
    runner_id = map_and_pair(api, tmp_path, checkout)
    runner = start_runner(tmp_path, "laptop")
    body = {"harness": "held", "dataset": "one", "runtime": f"self:{runner_id}"}
    run_id = int(api.ok("POST", "/api/workspaces/acme/runs", body)["id"])
    deadline = time.monotonic() + 60
    while not inside.exists():
        assert time.monotonic() < deadline, runner.output()
        time.sleep(0.05)
    runner.stop(signal.SIGKILL)
    # Its lease lapses; the next runner of the machine takes the case again, whole.
    again = start_runner(tmp_path, "laptop")
    try:
        run = api.wait_run(run_id, timeout=90)
    finally:
        assert again.stop(signal.SIGTERM) == 0, again.output()

    assert run["status"] == "succeeded", (run, again.output())
    assert (run["results"][0]["verdict"], run["results"][0]["score"]) == ("pass", 1.0)
    assert len(agents.read_text().split()) == 2  # the agent ran again, not just the verifier
    assert len(verifies.read_text().split()) == 2
    statuses = list(
        JobAttempt.objects.filter(job__run_id=run_id)
        .order_by("epoch")
        .values_list("status", flat=True)
    )
    assert len(statuses) == 2 and statuses[-1] == "succeeded", statuses
    assert snapshot(checkout) == before
    assert git(checkout, "status", "--porcelain") == ""
    assert worktree_paths(checkout) == []
    assert case_dirs(tmp_path) == []
