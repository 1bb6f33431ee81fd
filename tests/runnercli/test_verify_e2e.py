"""End to end, a verified case: daphne, the scheduler and `python -m runnercli run` as real
processes, a real git checkout of a small Python project with a bug and its pytest tests, the
verifier running pytest with a JUnit report.

The agents are the pinned real CLIs against the scripted model endpoints, each change made
with the CLI's own tools, in one runner session: Claude Code's fix passes with score 1;
Codex's edit of the test to expect a wrong value is tampered and fails, the verifier having
run the restored test; Claude Code's planted `conftest.py` making every test pass is tampered;
hidden tests the agent provably never saw (it lists its worktree, reads its case file and
prints its environment, and nothing of the hidden test ever reaches the model) decide the
verdict; a listed `fail_to_pass` test is named in the reason when it fails; and a case whose
stream passes the harness's `max_tokens` is stopped there, the verifier still deciding.

With scripted agents: a runner killed during the verifier runs the case whole on the next
attempt, and an agent that outlives the harness's timeout is stopped, reported `completed`
with what stopped it, and verified. The member's checkout is untouched and no worktree is left.
"""

from __future__ import annotations

import json
import re
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
from tests.agentclis.anthropic_api import AnthropicEndpoint
from tests.agentclis.clis import CODEX_MODEL, agent_home
from tests.agentclis.openai_api import ResponsesEndpoint
from tests.agentclis.scripted import Text, ToolCall
from tests.agentclis.test_claude_code_config import store_login
from tests.agentclis.test_through_the_runner import codex_config, member_env, pair
from tests.live import daphne, runner_cli, scheduler
from tests.runnercli.gitrepos import git, snapshot, worktree_paths
from tests.runnercli.test_e2e import Api, wait_output
from tests.runnercli.test_repo_e2e import case_dirs, map_and_pair, start_runner
from tests.runnercli.verifyrepo import (
    FIXED,
    HIDDEN_TEST,
    PROTECT,
    VERIFY,
    counted_harness,
    make_project,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

NAME = "acme/app"  # the name `map_and_pair` maps the checkout under
LISTED = {
    "fail_to_pass": ["tests/test_calc.py::test_add"],
    "pass_to_pass": ["tests/test_calc.py::test_zero"],
}
# Every scripted turn reports 1,000 input and 100 output tokens: the honest cases take at
# most three turns, the looping one passes the limit at its fifth.
MAX_TOKENS = 4500
CONFTEST = (
    "import pytest\n\n\n"
    "@pytest.hookimpl(hookwrapper=True)\n"
    "def pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n"
    "    outcome.get_result().outcome = 'passed'\n"
)
EDIT_THE_TEST = (
    "*** Begin Patch\n*** Update File: tests/test_calc.py\n@@\n"
    "-    assert add(2, 3) == 5\n+    assert add(2, 3) == -1\n*** End Patch\n"
)
READ_CALC = ToolCall("Read", {"file_path": "calc.py"})
FIX_CALC = ToolCall(
    "Edit", {"file_path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}
)
# Lists its worktree, reads its case file and prints its environment, then fixes the bug.
LOOK = (
    "ls -R . && env && printenv EVERDICT_CASE_FILE | xargs cat && sed -i 's/a - b/a + b/' calc.py"
)


def claude_code() -> AnthropicEndpoint:
    return AnthropicEndpoint(
        {
            "CLAUDE-FIX": [READ_CALC, FIX_CALC, Text("Fixed add.")],
            "CLAUDE-PLANT": [
                ToolCall("Write", {"file_path": "conftest.py", "content": CONFTEST}),
                Text("Every test passes now."),
            ],
            "CLAUDE-LOOK": [ToolCall("Bash", {"command": LOOK}), Text("Fixed add.")],
            "CLAUDE-IDLE": [Text("Nothing to do.")],
            "CLAUDE-LOOP": [
                READ_CALC,
                FIX_CALC,
                *(ToolCall("Bash", {"command": f"echo {n}"}) for n in range(8)),
                Text("Done at last."),
            ],
        }
    )


def codex() -> ResponsesEndpoint:
    return ResponsesEndpoint([ToolCall("apply_patch", EDIT_THE_TEST), Text("Made it pass.")])


@pytest.fixture
def api(workspace: Any, alice: Any, tmp_path: Path) -> Iterator[Api]:
    env = {"EVERDICT_LEASE_TTL_S": 5, "EVERDICT_QUEUE_IDLE_TIMEOUT_S": 120}
    with daphne(tmp_path, **env) as server, scheduler(tmp_path, **env):
        yield Api(server, api_key_create(user=alice, name="e2e").key)


def verified_harnesses(user: Any) -> None:
    verified = {
        "repo": {"name": NAME, "ref": "head"},
        "timeout_s": 120,
        "protect": PROTECT,
        "verify": VERIFY,
        "grader": {"type": "verify"},
    }
    harness_create(
        user=user,
        workspace_slug="acme",
        name="claude-verified",
        spec={
            "agent": {"cli": "claude-code"},
            "limits": {"max_tokens": MAX_TOKENS},
            **verified,
        },
    )
    harness_create(
        user=user,
        workspace_slug="acme",
        name="codex-verified",
        spec={"agent": {"cli": "codex", "model": CODEX_MODEL}, **verified},
    )
    dataset_create(
        user=user,
        workspace_slug="acme",
        name="claude-cases",
        cases=[
            {"key": "fix", "input": {"prompt": "CLAUDE-FIX: fix add."}, "tests": LISTED},
            {"key": "plant", "input": {"prompt": "CLAUDE-PLANT: make the tests pass."}},
            {"key": "idle", "input": {"prompt": "CLAUDE-IDLE: fix add."}, "tests": LISTED},
            {
                "key": "hidden",
                "input": {"prompt": "CLAUDE-LOOK: fix add."},
                "hidden_files": {"tests/test_hidden.py": HIDDEN_TEST},
                "tests": {"fail_to_pass": ["tests/test_hidden.py::test_hidden_negative"]},
            },
            {"key": "loop", "input": {"prompt": "CLAUDE-LOOP: fix add."}},
        ],
    )
    dataset_create(
        user=user,
        workspace_slug="acme",
        name="codex-cases",
        cases=[{"key": "edit", "input": {"prompt": "Make the tests pass."}, "tests": LISTED}],
    )


def start_run(api: Api, harness: str, dataset: str, runner_id: int) -> int:
    body = {"harness": harness, "dataset": dataset, "runtime": f"self:{runner_id}"}
    return int(api.ok("POST", "/api/workspaces/acme/runs", body)["id"])


@pytest.mark.agent_clis
def test_the_verifier_decides_tampering_fails_and_hidden_tests_stay_hidden(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    checkout = tmp_path / "member" / "app"
    make_project(checkout)
    before = snapshot(checkout)
    verified_harnesses(alice)
    runner_id = pair(api, tmp_path, checkout)
    (tmp_path / "cases").mkdir()
    claude_api, openai = claude_code(), codex()
    with agent_home() as home, claude_api.serve(), openai.serve():
        store_login(home.claude_config)
        codex_config(home.codex_home, openai.url)
        runner = runner_cli(
            tmp_path,
            ["run", "--wait-ms", "2000", "--max-concurrent", "2"],
            "laptop",
            **member_env(tmp_path, home, claude_api.url),
        )
        try:
            wait_output(runner, "connected to")
            claude_run = start_run(api, "claude-verified", "claude-cases", runner_id)
            codex_run = start_run(api, "codex-verified", "codex-cases", runner_id)
            runs = [api.wait_run(claude_run, timeout=240), api.wait_run(codex_run, timeout=120)]
        finally:
            assert runner.stop(signal.SIGTERM) == 0, runner.output()[-3000:]
    log = runner.output()[-3000:]

    results = {r["case"]: r for run in runs for r in run["results"]}
    rows = {
        row.case.key: row for row in CaseResult.objects.filter(run_id__in=[claude_run, codex_run])
    }
    said: dict[str, Any] = {key: row.verify for key, row in rows.items()}
    verdicts = {key: (r["verdict"], r["score"]) for key, r in results.items()}
    assert verdicts == {
        "fix": ("pass", 1.0),
        "edit": ("fail", 0.0),
        "plant": ("fail", 0.0),
        "idle": ("fail", 0.5),
        "hidden": ("pass", 1.0),
        "loop": ("pass", 1.0),
    }, ({key: r["reason"] for key, r in results.items()}, log)
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
    # The agent listed its worktree, read its case file and printed its environment: all of
    # it went to the model, and nothing of the hidden test did.
    looked = [r.text for r in claude_api.requests() if "CLAUDE-LOOK" in r.text]
    assert any("test_calc.py" in text and "EVERDICT_CASE_FILE=" in text for text in looked)
    assert not any("hidden_negative" in text or "add(-2, -3)" in text for text in looked)
    assert "tests.test_hidden.test_hidden_negative" in said["hidden"]["outcome"]["tests"]["passed"]
    for key, row in rows.items():
        assert row.phases is not None and row.phases["verify_s"] > 0, key
        assert "passed" in said[key]["stdout_tail"] or "failed" in said[key]["stdout_tail"]

    # The looping agent was stopped at the first message over the limit, then verified.
    loop = api.ok("GET", f"/api/runs/{claude_run}/cases/loop")
    stopped = loop["runs"][0]["result"]["stopped"]
    assert (stopped["by"], stopped["limit"], stopped["used"]["turns"]) == ("limit", "max_tokens", 5)
    assert stopped["used"]["tokens"] > MAX_TOKENS
    logged = [line["line"] for line in loop["logs"]]
    told = rf"stopped at [\d,]+ of {MAX_TOKENS:,} tokens after 5 turns"
    assert any(re.search(told, line) for line in logged), logged
    assert loop["runs"][0]["result"]["status"] == "completed"
    assert said["loop"]["outcome"]["tests"]["failed"] == []
    assert len([r for r in claude_api.requests() if "CLAUDE-LOOP" in r.text]) <= 6

    # The case's reply and page show the verifier, its failing tests first, and the tampering;
    # the runs' results mark the tampered ones.
    edited = api.ok("GET", f"/api/runs/{codex_run}/cases/edit")
    shown = edited["runs"][0]["result"]
    assert shown["tampered"] == [{"path": "tests/test_calc.py", "change": "modified"}]
    assert shown["tests"][0] == {"name": "tests.test_calc.test_add", "state": "failed"}
    assert shown["phases"]["verify_s"] > 0
    # The agent's diff of the protected paths, apart from the rest of repo.diff.
    assert "-    assert add(2, 3) == 5\n+    assert add(2, 3) == -1\n" in shown["protected_diff"]
    planted = api.ok("GET", f"/api/runs/{claude_run}/cases/plant")["runs"][0]["result"]
    assert planted["protected_diff"].startswith("diff --git a/conftest.py b/conftest.py\n")
    assert "calc.py" not in planted["protected_diff"].replace("conftest.py", "")
    claude, codex_ = runs
    assert [r["case"] for r in claude["results"] if r["tampered"]] == ["plant"]
    assert [r["case"] for r in codex_["results"] if r["tampered"]] == ["edit"]
    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/runs/{codex_run}/cases/edit/").content.decode()
    assert 'data-testid="tampered"' in page and "tests/test_calc.py" in page
    assert 'data-testid="verify-tests"' in page and 'data-testid="phases"' in page
    assert 'data-testid="protected-diff"' in page and "+    assert add(2, 3) == -1" in page
    run_page = browser.get(f"/runs/{claude_run}/").content.decode()
    assert run_page.count('data-testid="tampered"') == 1
    assert "1 result whose agent changed protected paths" in run_page
    assert 'data-testid="run-phases"' in run_page
    assert claude["summary"]["tampered"] == 1 and claude["summary"]["phases"]["verify_s"] > 0
    # The exports carry them too.
    jsonl_reply: Any = browser.get(f"/api/runs/{claude_run}/results.jsonl")
    exported = b"".join(jsonl_reply.streaming_content)
    lines = {row["case"]: row for row in map(json.loads, exported.decode().splitlines())}
    assert lines["plant"]["tampered"] == [{"path": "conftest.py", "change": "added"}]
    assert lines["fix"]["tampered"] == [] and lines["fix"]["phases"]["verify_s"] > 0
    assert lines["loop"]["stopped"]["limit"] == "max_tokens"
    csv_reply: Any = browser.get(f"/api/runs/{codex_run}/results.csv")
    table = b"".join(csv_reply.streaming_content)
    assert "tests/test_calc.py (modified)" in table.decode()

    assert snapshot(checkout) == before
    assert git(checkout, "status", "--porcelain") == ""
    assert worktree_paths(checkout) == []
    assert case_dirs(tmp_path) == []


# The agent counts its runs; the verifier counts its own and, the first time, says it is
# running and waits (ending when its runner is gone: it is orphaned, its parent changes).
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


# Fixes the bug when its case says so, then works on past the harness's timeout.
SLOW_AGENT = f"""
import sys, time
from pathlib import Path
if sys.argv[1] == "fix":
    Path("calc.py").write_text({FIXED!r})
print("still working", flush=True)
time.sleep(60)
"""


def start_slow_run(api: Api, alice: Any, tmp_path: Path, runner_id: int) -> int:
    (tmp_path / "slow.py").write_text(SLOW_AGENT)
    harness_create(
        user=alice,
        workspace_slug="acme",
        name="slow",
        spec={
            "command": [sys.executable, str(tmp_path / "slow.py"), "{case.key}"],
            "timeout_s": 2,
            "capabilities": ["python"],
            "repo": {"name": NAME, "ref": "head"},
            "protect": PROTECT,
            "verify": VERIFY,
            "grader": {"type": "verify"},
        },
    )
    cases = [{"key": key, "tests": LISTED} for key in ("fix", "idle")]
    dataset_create(user=alice, workspace_slug="acme", name="slow-cases", cases=cases)
    return start_run(api, "slow", "slow-cases", runner_id)


def test_a_killed_runner_reruns_the_case_whole_and_a_timed_out_agent_is_still_verified(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    checkout = tmp_path / "member" / "calc"
    make_project(checkout)
    before = snapshot(checkout)
    agents, verifies, inside = counted_harness(
        alice, tmp_path, name="held", repo=NAME, verifier_source=HELD_VERIFIER, flag="inside"
    )
    runner_id = map_and_pair(api, tmp_path, checkout)
    runner = start_runner(tmp_path, "laptop")
    body = {"harness": "held", "dataset": "one", "runtime": f"self:{runner_id}"}
    run_id = int(api.ok("POST", "/api/workspaces/acme/runs", body)["id"])
    deadline = time.monotonic() + 60
    while not inside.exists():
        assert time.monotonic() < deadline, runner.output()
        time.sleep(0.05)
    runner.stop(signal.SIGKILL)
    # Its lease lapses; the next runner of the machine takes the case again, whole. Then an
    # agent past its harness's timeout is stopped, and the verifier decides its case.
    again = start_runner(tmp_path, "laptop")
    try:
        run = api.wait_run(run_id, timeout=90)
        slow_id = start_slow_run(api, alice, tmp_path, runner_id)
        slow = api.wait_run(slow_id, timeout=90)
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

    verdicts = {r["case"]: (r["verdict"], r["score"], r["reason"]) for r in slow["results"]}
    assert verdicts == {
        "fix": ("pass", 1.0, "all 2 listed tests passed"),
        "idle": (
            "fail",
            0.5,
            "1 of 2 listed tests failing: fail_to_pass tests/test_calc.py::test_add (failed)",
        ),
    }, (slow, again.output())
    for key in ("fix", "idle"):
        result = api.ok("GET", f"/api/runs/{slow_id}/cases/{key}")["runs"][0]["result"]
        assert result["status"] == "completed", result
        assert result["stopped"] == {
            "by": "timeout",
            "limit": None,
            "used": {},
            "limits": {"timeout_s": 2},
        }
        assert result["verify"]["exit_code"] == (0 if key == "fix" else 1)
    assert snapshot(checkout) == before
    assert git(checkout, "status", "--porcelain") == ""
    assert worktree_paths(checkout) == []
    assert case_dirs(tmp_path) == []
