"""Agent presets expanded: the argv with the flags verified on the pinned CLIs, the streamed
output, the plan-limit `retry_on`, and `bypass` said loudly when the member is asked."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from runnercli.case.argv import case_env
from runnercli.case.consent.prompt import describe, one_line
from runnercli.protocol import CaseJob, harness_digest
from runnercli.protocol.agents import CLAUDE_CODE, CLAUDE_SANDBOX_SETTINGS, CODEX
from runnercli.protocol.presets import bypassing, expand, root_env

pytestmark = pytest.mark.once

CLAUDE_STREAM = ["claude", "-p", "--output-format", "stream-json", "--verbose"]
CODEX_EXEC = ["codex", "exec", "--json", "--skip-git-repo-check", "--ephemeral"]


def test_claude_code_in_the_worktree_edits_and_runs_commands_in_its_sandbox() -> None:
    spec = expand({"agent": {"cli": "claude-code", "prompt": "Fix it: {input.prompt}"}})
    assert spec.command == [
        *CLAUDE_STREAM,
        "--permission-mode",
        "acceptEdits",
        "--settings",
        CLAUDE_SANDBOX_SETTINGS,
        "--",
        "Fix it: {input.prompt}",
    ]
    assert spec.output == "claude-stream-json"
    assert spec.capabilities == ["claude"]
    assert spec.retry_on is not None
    assert spec.retry_on.output_regex == CLAUDE_CODE.plan_limit_regex
    assert (spec.retry_on.exit_codes, spec.retry_on.stderr_regex) == ([], "")


def test_claude_code_takes_its_model_and_the_turn_limit_from_limits() -> None:
    spec = expand(
        {
            "agent": {"cli": "claude-code", "model": "claude-sonnet-4-5", "permissions": "bypass"},
            "limits": {"max_turns": 12},
        }
    )
    assert spec.command == [
        *CLAUDE_STREAM,
        "--dangerously-skip-permissions",
        "--model",
        "claude-sonnet-4-5",
        "--max-turns",
        "12",
        "--",
        "{input.prompt}",
    ]
    assert spec.limits is not None and spec.limits.max_turns == 12


def test_claude_codes_cost_limit_is_its_max_budget_and_codex_cannot_have_one() -> None:
    spec = expand({"agent": {"cli": "claude-code"}, "limits": {"max_cost_usd": 0.5}})
    assert spec.command[-4:] == ["--max-budget-usd", "0.5", "--", "{input.prompt}"]
    with pytest.raises(ValidationError, match="Codex reports no cost"):
        expand({"agent": {"cli": "codex"}, "limits": {"max_cost_usd": 0.5}})


def test_codex_runs_in_its_workspace_write_sandbox_or_bypasses_it() -> None:
    worktree = expand({"agent": {"cli": "codex", "model": "gpt-5.5"}, "limits": {"max_turns": 3}})
    assert worktree.command == [
        *CODEX_EXEC,
        "--sandbox",
        "workspace-write",
        "-m",
        "gpt-5.5",
        "--",
        "{input.prompt}",
    ]
    assert worktree.output == "codex-jsonl"
    assert worktree.retry_on is not None
    assert worktree.retry_on.output_regex == CODEX.plan_limit_regex
    bypass = expand({"agent": {"cli": "codex", "permissions": "bypass"}})
    assert bypass.command == [
        *CODEX_EXEC,
        "--dangerously-bypass-approvals-and-sandbox",
        "--",
        "{input.prompt}",
    ]


def test_the_other_keys_are_the_authors_and_the_digest_is_the_expansions() -> None:
    source: dict[str, Any] = {
        "agent": {"cli": "claude-code"},
        "repo": {"name": "acme/app", "ref": "working"},
        "artifacts": ["out/*.json"],
        "timeout_s": 900,
        "capabilities": ["node"],
        "grader": {"type": "contains"},
        "agent_config": "clean",
    }
    spec = expand(source)
    assert spec.capabilities == ["claude", "node"]
    assert spec.repo is not None and spec.repo.ref == "working"
    assert (spec.timeout_s, spec.artifacts, spec.agent_config) == (900, ["out/*.json"], "clean")
    assert spec.grader.type == "contains"
    assert harness_digest(spec) == harness_digest(expand(dict(source)))
    assert "agent" not in spec.model_dump(mode="json")


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ({"agent": {"cli": "aider"}}, "agent.cli: Input should be 'claude-code' or 'codex'"),
        ({"agent": {"cli": "codex", "model": "--yolo"}}, "agent.model: a model name is"),
        ({"agent": {"cli": "codex", "permissions": "all"}}, "agent.permissions: Input should"),
        ({"agent": {"cli": "codex", "sandbox": "off"}}, "agent.sandbox: Extra inputs"),
        ({"agent": {"cli": "codex", "prompt": ""}}, "agent.prompt: String should have at"),
        ({"agent": {"cli": "codex"}, "timeout_s": 0}, "timeout_s: Input should be greater"),
        ({"agent": {"cli": "codex"}, "limits": {}}, "limits: limits needs"),
    ],
)
def test_a_bad_preset_is_refused_with_where_and_why(source: dict[str, Any], reason: str) -> None:
    with pytest.raises(ValidationError) as refused:
        expand(source)
    where = [
        ".".join(map(str, e["loc"])) + ": " + e["msg"].removeprefix("Value error, ")
        for e in refused.value.errors()
    ]
    assert any(line.startswith(reason) for line in where), where


@pytest.mark.parametrize("key", ["command", "output", "retry_on"])
def test_a_key_the_expansion_writes_is_refused_beside_agent(key: str) -> None:
    with pytest.raises(ValueError, match=f"^{key}: the agent preset writes it; leave {key} out"):
        expand({"agent": {"cli": "codex"}, key: ["x"]})


def test_a_prompt_that_reads_like_a_flag_is_still_the_prompt() -> None:
    command = expand({"agent": {"cli": "claude-code", "prompt": "--dangerously-skip-permissions"}})
    assert command.command[-2:] == ["--", "--dangerously-skip-permissions"]
    assert bypassing(command.command) is None


def test_bypass_is_named_loudly_when_the_member_is_asked() -> None:
    job = _job(expand({"agent": {"cli": "claude-code", "permissions": "bypass"}}))
    lines = "\n".join(describe(job))
    assert "PERMISSIONS: BYPASS — claude runs every tool and command WITHOUT ASKING" in lines
    assert "outside its directory too" in lines
    assert one_line(job).startswith("PERMISSIONS: BYPASS (claude runs everything unasked")
    worktree = _job(expand({"agent": {"cli": "claude-code"}}))
    assert "BYPASS" not in "\n".join(describe(worktree)) + one_line(worktree)


def test_as_root_claude_bypass_is_told_it_runs_in_a_sandbox(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bypass = expand({"agent": {"cli": "claude-code", "permissions": "bypass"}})
    monkeypatch.setattr("os.geteuid", lambda: 0)
    assert root_env(bypass.command) == {"IS_SANDBOX": "1"}
    assert case_env(_job(bypass), {})["IS_SANDBOX"] == "1"
    assert root_env(expand({"agent": {"cli": "codex", "permissions": "bypass"}}).command) == {}
    assert root_env(expand({"agent": {"cli": "claude-code"}}).command) == {}
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    assert root_env(bypass.command) == {}


def _job(spec: Any) -> CaseJob:
    return CaseJob.model_validate(
        {
            "job_id": 1,
            "attempt_id": 1,
            "lease_epoch": 1,
            "run_id": 7,
            "workspace": "acme",
            "submitted_by": "bob",
            "case": {"key": "c1", "input": {"prompt": "fix the bug"}},
            "harness": {
                "name": "agent",
                "version": 1,
                "digest": harness_digest(spec),
                "author": "alice",
                "spec": spec.model_dump(mode="json"),
            },
            "timeout_s": 600,
        }
    )
