"""The pinned Claude Code, run for real against a scripted Anthropic endpoint: its agent loop,
its tools in a git repo, its stream, and the facts docs/agents.md records about it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from runnercli.protocol.agents import CLAUDE_CODE
from tests.agentclis.anthropic_api import INPUT_TOKENS, OUTPUT_TOKENS, AnthropicEndpoint
from tests.agentclis.anthropic_api import error_body as anthropic_error
from tests.agentclis.clis import (
    AgentHome,
    base_env,
    claude,
    claude_env,
    claude_print,
    git_status,
)
from tests.agentclis.scripted import HttpError, StreamError, Text, ToolCall

pytestmark = [pytest.mark.agent_clis, pytest.mark.once]

WORKTREE = CLAUDE_CODE.permissions["worktree"]
# The default model's price (claude-opus-4-8: $5 and $25 per million tokens in and out), as
# the pinned version computes `total_cost_usd` from the usage the endpoint reports.
TURN_COST_USD = INPUT_TOKENS * 5e-6 + OUTPUT_TOKENS * 25e-6


def tool_results(run: Any) -> list[dict[str, Any]]:
    return [
        block
        for event in run.of_type("user")
        for block in event["message"]["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def tool_calls(run: Any) -> list[dict[str, Any]]:
    return [
        block
        for event in run.of_type("assistant")
        for block in event["message"]["content"]
        if block.get("type") == "tool_use"
    ]


def test_it_runs_a_command_and_edits_a_file_in_the_repo(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    endpoint = serve(
        AnthropicEndpoint(
            [
                ToolCall("Bash", {"command": "cat hello.txt && echo ran > ran.txt"}),
                ToolCall("Read", {"file_path": str(repo / "hello.txt")}),
                ToolCall(
                    "Edit",
                    {
                        "file_path": str(repo / "hello.txt"),
                        "old_string": "hello",
                        "new_string": "hi",
                    },
                ),
                Text("Edited hello.txt."),
            ]
        )
    )
    run = claude(
        claude_print("Greet less formally.", *WORKTREE),
        cwd=repo,
        env=claude_env(home, endpoint.url),
    )

    assert run.returncode == 0, run.stderr
    init = run.init
    assert (init["subtype"], init["cwd"], init["claude_code_version"]) == (
        "init",
        str(repo),
        CLAUDE_CODE.version,
    )
    calls = tool_calls(run)
    assert (calls[0]["name"], calls[0]["input"]) == (
        "Bash",
        {"command": "cat hello.txt && echo ran > ran.txt"},
    )
    assert [c["name"] for c in calls] == ["Bash", "Read", "Edit"]
    results = tool_results(run)
    assert [r["tool_use_id"] for r in results] == [c["id"] for c in calls]
    assert [r.get("is_error") for r in results] == [False, None, None]
    assert results[0]["content"] == "hello"
    result = run.result
    assert (result["subtype"], result["is_error"], result["result"]) == (
        "success",
        False,
        "Edited hello.txt.",
    )
    assert result["num_turns"] == 4
    assert result["usage"]["input_tokens"] == 4 * INPUT_TOKENS
    assert result["usage"]["output_tokens"] == 4 * OUTPUT_TOKENS
    assert result["total_cost_usd"] == pytest.approx(4 * TURN_COST_USD)
    assert (repo / "hello.txt").read_text() == "hi\n"
    assert git_status(repo) == " M hello.txt\n?? ran.txt\n"
    # One request a turn, each the whole conversation so far.
    replies = [
        sum(m["role"] == "assistant" for m in r.body["messages"]) for r in endpoint.requests()
    ]
    assert replies == [0, 1, 2, 3]


def test_worktree_permissions_run_commands_but_write_only_inside_the_repo(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    outside = repo.parent / "outside.txt"
    endpoint = serve(
        AnthropicEndpoint(
            [
                ToolCall("Bash", {"command": "python3 -c 'print(6 * 7)' > answer.txt"}),
                ToolCall("Bash", {"command": f"echo escaped > {outside}"}),
                ToolCall("Write", {"file_path": str(outside), "content": "escaped\n"}),
                ToolCall("Write", {"file_path": str(repo / "new.txt"), "content": "new\n"}),
                Text("done"),
            ]
        )
    )
    run = claude(claude_print("Try.", *WORKTREE), cwd=repo, env=claude_env(home, endpoint.url))

    assert run.returncode == 0, run.stderr
    results = tool_results(run)
    assert [r.get("is_error") for r in results] == [False, True, True, None]
    # Commands run in its sandbox, where only the working directory is writable …
    assert "Read-only file system" in results[1]["content"]
    # … and its own write tool asks, which print mode answers no.
    assert results[2]["content"].startswith("Claude requested permissions to write to")
    assert [d["tool_name"] for d in run.result["permission_denials"]] == ["Write"]
    assert not outside.exists()
    assert (repo / "answer.txt").read_text() == "42\n"
    assert (repo / "new.txt").read_text() == "new\n"


def test_worktree_permissions_refuse_to_start_without_a_sandbox(
    home: AgentHome, repo: Path, serve: Any, tmp_path: Path
) -> None:
    endpoint = serve(AnthropicEndpoint([Text("never asked")]))
    # A PATH with git but no bubblewrap.
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "git").symlink_to("/usr/bin/git")
    env = claude_env(home, endpoint.url, PATH=str(bare))

    run = claude(claude_print("Try.", *WORKTREE), cwd=repo, env=env)

    assert run.returncode == 1
    assert run.stderr.startswith("\nError: sandbox required but unavailable:")
    assert "bubblewrap (bwrap) not installed" in run.stderr
    assert run.result["subtype"] == "error_during_execution"
    assert endpoint.requests() == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the refusal is for root")
def test_bypass_as_root_needs_is_sandbox(home: AgentHome, repo: Path, serve: Any) -> None:
    outside = repo.parent / "outside.txt"
    endpoint = serve(
        AnthropicEndpoint([ToolCall("Bash", {"command": f"echo x > {outside}"}), Text("done")])
    )
    bypass = CLAUDE_CODE.permissions["bypass"]

    refused = claude(claude_print("Go.", *bypass), cwd=repo, env=claude_env(home, endpoint.url))
    assert refused.returncode == 1
    assert refused.stderr == (
        "--dangerously-skip-permissions cannot be used with root/sudo privileges "
        "for security reasons\n"
    )
    assert endpoint.requests() == []

    env = claude_env(home, endpoint.url, **CLAUDE_CODE.bypass_root_env)
    run = claude(claude_print("Go.", *bypass), cwd=repo, env=env)
    assert run.returncode == 0, run.stderr
    assert run.result["permission_denials"] == []
    assert outside.read_text() == "x\n"


def test_max_turns_ends_the_run_as_an_error(home: AgentHome, repo: Path, serve: Any) -> None:
    echo = ToolCall("Bash", {"command": "echo again"})
    endpoint = serve(AnthropicEndpoint([echo, echo, echo, Text("done")]))
    run = claude(
        claude_print("Loop.", *WORKTREE, "--max-turns", "2"),
        cwd=repo,
        env=claude_env(home, endpoint.url),
    )

    assert run.returncode == 1
    result = run.result
    assert (result["subtype"], result["is_error"], result["terminal_reason"]) == (
        "error_max_turns",
        True,
        "max_turns",
    )
    assert result["errors"] == ["Reached maximum number of turns (2)"]
    assert len(endpoint.requests()) == 2


def test_a_failing_command_is_a_tool_result_with_is_error(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    endpoint = serve(
        AnthropicEndpoint([ToolCall("Bash", {"command": "echo oops >&2; exit 3"}), Text("done")])
    )
    run = claude(claude_print("Fail.", *WORKTREE), cwd=repo, env=claude_env(home, endpoint.url))

    assert run.returncode == 0
    [failed] = tool_results(run)
    assert (failed["is_error"], failed["content"]) == (True, "Exit code 3\noops")
    assert run.result["is_error"] is False


def test_a_400_from_the_api_ends_the_run_with_its_message(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    refusal = anthropic_error("invalid_request_error", "messages.1: tool_use ids must be unique")
    endpoint = serve(AnthropicEndpoint([HttpError(400, refusal)]))
    run = claude(claude_print("Go.", *WORKTREE), cwd=repo, env=claude_env(home, endpoint.url))

    assert (run.returncode, run.stderr) == (1, "")
    result = run.result
    # `subtype` stays "success": `is_error` is what says the run failed.
    assert (result["subtype"], result["is_error"], result["api_error_status"]) == (
        "success",
        True,
        400,
    )
    assert result["result"] == "API Error: 400 messages.1: tool_use ids must be unique"
    [said] = run.of_type("assistant")
    assert said["message"]["model"] == "<synthetic>"
    assert said["message"]["content"][0]["text"] == result["result"]
    assert len(endpoint.requests()) == 1


def test_a_stream_that_breaks_off_ends_the_run_as_an_error(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    endpoint = serve(AnthropicEndpoint([StreamError("Overloaded")]))
    env = claude_env(home, endpoint.url, CLAUDE_CODE_MAX_RETRIES="0")
    run = claude(claude_print("Go.", *WORKTREE), cwd=repo, env=env)

    assert run.returncode == 1
    result = run.result
    assert (result["is_error"], result["api_error_status"]) == (True, None)
    assert result["result"].startswith("API Error: Repeated 529 Overloaded errors.")
    # Three streamed tries, then one without a stream, whatever CLAUDE_CODE_MAX_RETRIES says.
    assert [r.body.get("stream") for r in endpoint.requests()] == [True, True, True, None]


def test_version_is_the_first_word_of_its_only_line(home: AgentHome) -> None:
    done = claude(["--version"], cwd=home.home, env=base_env(home))
    assert (done.returncode, done.stdout, done.stderr) == (0, "2.1.197 (Claude Code)\n", "")


def test_a_judge_quoting_the_case_gets_the_judges_script(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    verdict = '{"pass": true, "score": 1, "reason": "it says 42"}'
    endpoint = serve(AnthropicEndpoint({"JUDGE-7f3a": [Text(verdict)], "CASE-19c2": [Text("42")]}))
    env = claude_env(home, endpoint.url)
    case = claude(
        ["-p", "CASE-19c2: what is six times seven?", "--output-format", "json"],
        cwd=repo,
        env=env,
    )
    judge = claude(
        [
            "-p",
            "JUDGE-7f3a: did the answer '42' fit the case 'CASE-19c2: what is six times seven?'",
            "--output-format",
            "json",
        ],
        cwd=repo,
        env=env,
    )

    # `--output-format json` prints the final `result` object alone.
    assert [json.loads(done.stdout)["result"] for done in (case, judge)] == ["42", verdict]
