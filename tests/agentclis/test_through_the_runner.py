"""End to end, the pinned real agent CLIs run by the member's runner: daphne, the scheduler,
`python -m runnercli run`, and `claude` and `codex` on its PATH, talking to the scripted
endpoints on 127.0.0.1, each case in a worktree of the member's checkout.

One server session: a Claude Code harness (its verdict decided by a Claude Code judge) and a
Codex harness, both agent presets, whose scripted turns run a shell command and edit a file
(Codex through its patch tool); a case whose model API answers 400; and last, a plan limit,
which hands its case back and pauses the runner until the reset the CLI stated.
"""

from __future__ import annotations

import json
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from runners.models import Runner, RunnerJob
from scorecards.services import dataset_create, harness_create
from tests.agentclis.anthropic_api import AnthropicEndpoint
from tests.agentclis.anthropic_api import error_body as anthropic_error
from tests.agentclis.clis import CLAUDE, CODEX_BIN, CODEX_MODEL, AgentHome, agent_home
from tests.agentclis.openai_api import ResponsesEndpoint
from tests.agentclis.scripted import HttpError, Text, ToolCall
from tests.agentclis.test_claude_code_config import plan_limit, store_login
from tests.live import runner_cli, sealed_host
from tests.runnercli.gitrepos import make_checkout, snapshot, worktree_paths
from tests.runnercli.test_e2e import Api, wait_output
from tests.runnercli.test_repo_e2e import NAME, api, download

__all__ = ["api"]

pytestmark = [
    pytest.mark.agent_clis,
    pytest.mark.e2e,
    pytest.mark.once,
    pytest.mark.django_db(transaction=True),
]

PATCH = "*** Begin Patch\n*** Update File: README.md\n@@\n-hello\n+hi from codex\n*** End Patch\n"
VERDICT = {"pass": True, "score": 1, "reason": "it ran the command and greeted less formally"}
REFUSAL = "messages.1: tool_use ids must be unique"


def anthropic(reset: int) -> AnthropicEndpoint:
    # The judge's marker first: a judge's prompt may quote the case.
    return AnthropicEndpoint(
        {
            "JUDGE-5e1d": [Text(json.dumps(VERDICT))],
            "CLAUDE-EDIT": [
                ToolCall("Bash", {"command": "cat README.md && echo ran > ran.txt"}),
                ToolCall("Read", {"file_path": "README.md"}),
                ToolCall(
                    "Edit", {"file_path": "README.md", "old_string": "hello", "new_string": "hi"}
                ),
                Text("Edited README.md."),
            ],
            "CLAUDE-400": [HttpError(400, anthropic_error("invalid_request_error", REFUSAL))],
            "CLAUDE-LIMIT": [plan_limit(reset)],
        }
    )


def codex() -> ResponsesEndpoint:
    return ResponsesEndpoint(
        [
            ToolCall("exec_command", {"cmd": "cat README.md && echo ran > ran.txt"}),
            ToolCall("apply_patch", PATCH),
            Text("Patched README.md."),
        ]
    )


def harnesses(user: Any) -> None:
    judge = {
        "type": "judge",
        "rubric": "Did it run the command and edit the README?",
        "judge": {
            "command": [
                "claude",
                "-p",
                "JUDGE-5e1d: judge the case in {judge.file}",
                "--output-format",
                "json",
            ],
            "capabilities": ["claude"],
            "timeout_s": 120,
        },
    }
    repo = {"name": NAME, "ref": "head"}
    specs: dict[str, dict[str, Any]] = {
        "claude-agent": {"agent": {"cli": "claude-code"}, "grader": judge},
        "codex-agent": {
            "agent": {"cli": "codex", "model": CODEX_MODEL},
            "grader": {"type": "contains"},
        },
    }
    for name, spec in specs.items():
        harness_create(
            user=user,
            workspace_slug="acme",
            name=name,
            spec={**spec, "repo": repo, "timeout_s": 120},
        )
    for name, cases in {
        "claude-cases": [
            {"key": "edit", "input": {"prompt": "CLAUDE-EDIT: greet less formally."}},
            {"key": "bad", "input": {"prompt": "CLAUDE-400: go."}},
        ],
        "codex-cases": [
            {"key": "patch", "input": {"prompt": "Greet less formally."}, "expected": "Patched"}
        ],
        "limit-cases": [{"key": "limit", "input": {"prompt": "CLAUDE-LIMIT: go."}}],
    }.items():
        dataset_create(user=user, workspace_slug="acme", name=name, cases=cases)


def agents_on_path(tmp_path: Path) -> Path:
    """`claude` and `codex` as a member's PATH has them: the pinned native binaries."""
    bin_dir = tmp_path / "agents-bin"
    bin_dir.mkdir()
    (bin_dir / "claude").symlink_to(CLAUDE)
    (bin_dir / "codex").symlink_to(CODEX_BIN)
    return bin_dir


def member_env(tmp_path: Path, home: AgentHome, anthropic_url: str) -> dict[str, Any]:
    """A runner's environment on a member's machine whose `claude` and `codex` (the pinned
    binaries, first on PATH) answer to the scripted endpoints, cases under tmp_path/cases."""
    return {
        "PATH": f"{agents_on_path(tmp_path)}:{sealed_host(tmp_path)['PATH']}",
        "TMPDIR": tmp_path / "cases",
        "HOME": home.home,
        "CLAUDE_CONFIG_DIR": home.claude_config,
        "ANTHROPIC_BASE_URL": anthropic_url,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CODEX_HOME": home.codex_home,
        "SCRIPTED_KEY": "sk-scripted",
    }


def codex_config(codex_home: Path, url: str) -> None:
    """The member's Codex, pointed at the scripted endpoint by its own config.toml."""
    (codex_home / "config.toml").write_text(
        'model_provider = "scripted"\n\n[model_providers.scripted]\nname = "scripted"\n'
        f'base_url = "{url}/v1"\nwire_api = "responses"\nenv_key = "SCRIPTED_KEY"\n'
        "request_max_retries = 0\nstream_max_retries = 0\n"
    )


def pair(api: Api, tmp_path: Path, checkout: Path) -> int:
    config = tmp_path / "laptop.json"
    added = runner_cli(
        tmp_path, ["repo", "add", NAME, str(checkout)], "laptop-repo", EVERDICT_RUNNER_CONFIG=config
    )
    assert added.popen.wait(30) == 0, added.output()
    body = {"label": "laptop", "capabilities": ["claude", "codex"]}
    paired = api.ok("POST", "/api/runners", body)
    done = runner_cli(
        tmp_path, ["pair", "--server", api.server.url, "--token", paired["token"]], "laptop"
    )
    assert done.popen.wait(30) == 0, done.output()
    return int(paired["id"])


def run_of(api: Api, harness: str, dataset: str, runner_id: int) -> int:
    body = {"harness": harness, "dataset": dataset, "runtime": f"self:{runner_id}"}
    return int(api.ok("POST", "/api/workspaces/acme/runs", body)["id"])


def result_of(api: Api, run_id: int, key: str) -> dict[str, Any]:
    return api.ok("GET", f"/api/runs/{run_id}/cases/{key}")["runs"][0]["result"]


def trace_of(api: Api, run_id: int, key: str) -> list[dict[str, Any]]:
    return list(api.ok("GET", f"/api/runs/{run_id}/trace?key={key}")["events"])


def diff_of(api: Api, result: dict[str, Any]) -> str:
    [listed] = [a for a in result["artifacts"] if a["path"] == "repo.diff"]
    return download(api, listed["url"])[1].decode()


def test_the_real_clis_run_cases_through_the_runner(api: Api, alice: Any, tmp_path: Path) -> None:
    # Half past the hour, one to two hours ahead: what the plan limit says it resets at.
    reset = (int(time.time()) // 3600 + 2) * 3600 - 1800
    harnesses(alice)
    checkout = tmp_path / "member" / "app"
    make_checkout(checkout)
    runner_id = pair(api, tmp_path, checkout)
    before = snapshot(checkout)
    (tmp_path / "cases").mkdir()
    with agent_home() as home, anthropic(reset).serve() as claude_api, codex().serve() as openai:
        # A subscription login (a plan limit says its reset only to one), no API key.
        store_login(home.claude_config)
        codex_config(home.codex_home, openai.url)
        runner = runner_cli(
            tmp_path,
            ["run", "--wait-ms", "2000"],
            "laptop",
            TZ="UTC",
            **member_env(tmp_path, home, claude_api.url),
        )
        try:
            wait_output(runner, "connected to")
            claude_run = run_of(api, "claude-agent", "claude-cases", runner_id)
            codex_run = run_of(api, "codex-agent", "codex-cases", runner_id)
            api.wait_run(claude_run, timeout=180)
            api.wait_run(codex_run, timeout=120)
            limit_run = run_of(api, "claude-agent", "limit-cases", runner_id)
            wait_output(runner, "Claude plan limit: handed back", timeout=60)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not roster(api, runner_id).startswith("paused"):
                time.sleep(0.3)
            status = roster(api, runner_id)
        finally:
            assert runner.stop(signal.SIGTERM) == 0, runner.output()[-3000:]
        log = runner.output()

    # Claude Code: each tool call with its arguments and result, the answer judged, its cost.
    edit = result_of(api, claude_run, "edit")
    assert (edit["status"], edit["verdict"]) == ("completed", "pass"), (edit, log[-3000:])
    assert edit["output"] == "Edited README.md."
    assert edit["reason"] == VERDICT["reason"]
    assert (
        edit["usage"]["total_cost_usd"] > 0 and edit["cost_usd"] == edit["usage"]["total_cost_usd"]
    )
    events = trace_of(api, claude_run, "edit")
    calls = [(e["name"], e["data"]["input"]) for e in events if e["kind"] == "tool_call"]
    assert calls == [
        ("Bash", {"command": "cat README.md && echo ran > ran.txt"}),
        ("Read", {"file_path": "README.md"}),
        # As the CLI ran it: with its default filled in.
        (
            "Edit",
            {
                "replace_all": False,
                "file_path": "README.md",
                "old_string": "hello",
                "new_string": "hi",
            },
        ),
    ]
    results = [e for e in events if e["kind"] == "tool_result"]
    assert [r["name"] for r in results] == ["Bash", "Read", "Edit"]
    assert results[0]["data"]["content"] == "hello" and not results[0]["data"]["is_error"]
    diff = diff_of(api, edit)
    assert "-hello\n+hi\n" in diff and "b/ran.txt" in diff

    # A 400 from the model API: an error quoting the API's message, never graded.
    bad = result_of(api, claude_run, "bad")
    assert (bad["status"], bad["verdict"]) == ("error", "error"), bad
    assert bad["output"] == f"API Error: 400 {REFUSAL}"
    assert bad["error"] == f"runner reported an error: API Error: 400 {REFUSAL}"

    # Codex: its command and its patch, the answer graded, its tokens.
    patch = result_of(api, codex_run, "patch")
    assert (patch["status"], patch["verdict"], patch["output"]) == (
        "completed",
        "pass",
        "Patched README.md.",
    ), (patch, log[-3000:])
    assert patch["usage"]["input_tokens"] > 0 and patch["usage"]["output_tokens"] > 0
    events = trace_of(api, codex_run, "patch")
    calls = [(e["name"], e["data"]) for e in events if e["kind"] == "tool_call"]
    assert [name for name, _ in calls] == ["shell", "apply_patch"]
    assert calls[0][1]["command"] == "/bin/bash -lc 'cat README.md && echo ran > ran.txt'"
    shell = next(e for e in events if e["kind"] == "tool_result" and e["name"] == "shell")
    assert (shell["data"]["output"], shell["data"]["exit_code"]) == ("hello\n", 0)
    diff = diff_of(api, patch)
    assert "-hello\n+hi from codex\n" in diff and "b/ran.txt" in diff

    # The plan limit: handed back with no attempt spent, the runner paused until the reset.
    job = RunnerJob.objects.get(run_id=limit_run)
    assert (job.status, job.attempts) == ("queued", 0), job
    assert not api.ok("GET", f"/api/runs/{limit_run}")["results"]
    paused = Runner.objects.get(pk=runner_id)
    assert paused.pause_reason == "Claude plan limit"
    assert paused.paused_until is not None
    assert abs(paused.paused_until.timestamp() - reset) < 1, paused.paused_until
    # The reset is an hour or two ahead: past midnight the status line says its date too.
    moment = datetime.fromtimestamp(reset, UTC)
    shown = "%H:%M" if moment.date() == datetime.now(UTC).date() else "%Y-%m-%d %H:%M"
    assert status == f"paused until {moment.strftime(shown)} — Claude plan limit", status

    # The member's checkout is as it was; no worktree is left.
    assert snapshot(checkout) == before
    assert worktree_paths(checkout) == []


def roster(api: Api, runner_id: int) -> str:
    runners = api.ok("GET", "/api/runners")
    return str(next(r["status"] for r in runners if r["id"] == runner_id))
