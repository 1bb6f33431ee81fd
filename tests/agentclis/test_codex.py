"""The pinned Codex, run for real against a scripted Responses endpoint: its agent loop, its
shell and patch tools in a git repo, its `--json` stream, and the facts docs/agents.md records
about it."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runnercli.protocol.agents import CODEX
from tests.agentclis.clis import (
    CODEX_BIN,
    AgentHome,
    Run,
    base_env,
    codex_env,
    codex_exec,
    git_status,
    run,
)
from tests.agentclis.openai_api import (
    CACHED_INPUT_TOKENS,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    REASONING_TOKENS,
    ResponsesEndpoint,
)
from tests.agentclis.openai_api import error_body as openai_error
from tests.agentclis.scripted import HttpError, StreamError, Text, ToolCall

pytestmark = [pytest.mark.agent_clis, pytest.mark.once]

WORKTREE = CODEX.permissions["worktree"]
PATCH = "*** Begin Patch\n*** Update File: hello.txt\n@@\n-hello\n+hi\n*** End Patch\n"
# What `codex exec` says on stderr whenever its stdin is not a terminal, /dev/null included.
STDIN_NOTE = "Reading additional input from stdin...\n"


def completed(run: Run, kind: str) -> list[dict[str, Any]]:
    return [e["item"] for e in run.of_type("item.completed") if e["item"]["type"] == kind]


def tool_outputs(endpoint: ResponsesEndpoint) -> list[str]:
    """What Codex sent back to the model as each tool call's output."""
    last = endpoint.requests()[-1].body["input"]
    return [item["output"] for item in last if item.get("type", "").endswith("call_output")]


def test_it_runs_a_command_and_patches_a_file_in_the_repo(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    endpoint = serve(
        ResponsesEndpoint(
            [
                ToolCall("exec_command", {"cmd": "cat hello.txt && echo ran > ran.txt"}),
                ToolCall("apply_patch", PATCH),
                Text("Patched hello.txt."),
            ]
        )
    )
    done = run(
        codex_exec(endpoint.url, "Greet less formally.", *WORKTREE), cwd=repo, env=codex_env(home)
    )

    assert (done.returncode, done.stderr) == (0, STDIN_NOTE)
    kinds = [e["type"] for e in done.events]
    assert kinds[:2] == ["thread.started", "turn.started"]
    assert kinds[-1] == "turn.completed"
    [command] = completed(done, "command_execution")
    assert command["command"] == "/bin/bash -lc 'cat hello.txt && echo ran > ran.txt'"
    assert (command["aggregated_output"], command["exit_code"], command["status"]) == (
        "hello\n",
        0,
        "completed",
    )
    [patch] = completed(done, "file_change")
    assert patch["changes"] == [{"path": str(repo / "hello.txt"), "kind": "update"}]
    assert patch["status"] == "completed"
    [answer] = completed(done, "agent_message")
    assert answer["text"] == "Patched hello.txt."
    # Summed over the turn's three model calls; no cost is reported.
    assert done.of_type("turn.completed")[0]["usage"] == {
        "input_tokens": 3 * INPUT_TOKENS,
        "cached_input_tokens": 3 * CACHED_INPUT_TOKENS,
        "cache_write_input_tokens": 0,
        "output_tokens": 3 * OUTPUT_TOKENS,
        "reasoning_output_tokens": 3 * REASONING_TOKENS,
    }
    assert (repo / "hello.txt").read_text() == "hi\n"
    assert git_status(repo) == " M hello.txt\n?? ran.txt\n"
    outputs = tool_outputs(endpoint)
    assert outputs[0].endswith(
        "Process exited with code 0\nOriginal token count: 2\nOutput:\nhello\n"
    )
    assert "Success. Updated the following files:\nM hello.txt" in outputs[1]


def test_worktree_sandbox_writes_only_inside_the_repo_and_tmp_without_network(
    home: AgentHome, repo: Path, serve: Any, outside_tmp: Path
) -> None:
    # Not under /tmp, which the sandbox leaves writable (the test's repo is there too, and
    # the checkout may be).
    outside = outside_tmp / "outside.txt"
    endpoint = serve(ResponsesEndpoint([]))
    add_outside = f"*** Begin Patch\n*** Add File: {outside}\n+escaped\n*** End Patch\n"
    endpoint.scripts[""] = [
        ToolCall("exec_command", {"cmd": f"echo escaped > {outside}"}),
        ToolCall("exec_command", {"cmd": f"curl -sS -m 5 {endpoint.url}/v1/models"}),
        ToolCall("exec_command", {"cmd": "git add hello.txt"}),
        ToolCall("apply_patch", add_outside),
        ToolCall("exec_command", {"cmd": "echo inside > inside.txt"}),
        Text("done"),
    ]
    done = run(codex_exec(endpoint.url, "Try.", *WORKTREE), cwd=repo, env=codex_env(home))

    assert done.returncode == 0
    outputs = tool_outputs(endpoint)
    assert "Read-only file system" in outputs[0]
    assert "Couldn't connect to server" in outputs[1]
    # The repo's .git is read-only too.
    assert "index.lock': Read-only file system" in outputs[2]
    assert (
        outputs[3]
        == "patch rejected: writing outside of the project; rejected by user approval settings"
    )
    assert not outside.exists()
    assert (repo / "inside.txt").read_text() == "inside\n"
    # A command the sandbox refused is in the stream only some of the time (a race in Codex:
    # about one run in four here); when it is, as a failed command.
    refused = [i for i in completed(done, "command_execution") if "git add" in i["command"]]
    assert [(i["exit_code"], i["status"]) for i in refused] in ([], [(128, "failed")])
    assert completed(done, "file_change") == []
    headers = endpoint.requests()[0].headers["x-codex-turn-metadata"]
    assert '"sandbox_mode":"workspace-write"' in headers


def test_bypass_runs_unconfined(home: AgentHome, repo: Path, serve: Any) -> None:
    outside = repo.parent / "outside.txt"
    endpoint = serve(
        ResponsesEndpoint([ToolCall("exec_command", {"cmd": f"echo x > {outside}"}), Text("ok")])
    )
    bypass = CODEX.permissions["bypass"]
    done = run(codex_exec(endpoint.url, "Go.", *bypass), cwd=repo, env=codex_env(home))

    assert done.returncode == 0, done.stdout
    assert outside.read_text() == "x\n"


def test_a_failing_command_is_a_failed_command_execution(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    endpoint = serve(
        ResponsesEndpoint([ToolCall("exec_command", {"cmd": "echo oops >&2; exit 3"}), Text("ok")])
    )
    done = run(codex_exec(endpoint.url, "Fail.", *WORKTREE), cwd=repo, env=codex_env(home))

    assert done.returncode == 0
    [command] = completed(done, "command_execution")
    assert (command["aggregated_output"], command["exit_code"], command["status"]) == (
        "oops\n",
        3,
        "failed",
    )


def test_a_400_from_the_api_fails_the_turn_with_the_raw_body(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    refusal = openai_error("Invalid 'input[3].call_id': unknown call id.", code="invalid_value")
    endpoint = serve(ResponsesEndpoint([HttpError(400, refusal)]))
    # Retries as Codex's defaults have them: a 400 is never retried.
    done = run(
        codex_exec(endpoint.url, "Go.", *WORKTREE, retries=True), cwd=repo, env=codex_env(home)
    )

    assert (done.returncode, done.stderr) == (1, STDIN_NOTE)
    body = (
        '{"error": {"type": "invalid_request_error", "message": "Invalid '
        '\'input[3].call_id\': unknown call id.", "code": "invalid_value"}}'
    )
    assert done.events[2:] == [
        {"type": "error", "message": body},
        {"type": "turn.failed", "error": {"message": body}},
    ]
    assert len(endpoint.requests()) == 1


def test_a_stream_that_fails_is_retried_then_fails_the_turn(
    home: AgentHome, repo: Path, serve: Any
) -> None:
    endpoint = serve(ResponsesEndpoint([StreamError("The server had an error.", "server_error")]))
    done = run(
        codex_exec(endpoint.url, "Go.", *WORKTREE, retries=True), cwd=repo, env=codex_env(home)
    )

    assert done.returncode == 1
    message = "stream disconnected before completion: The server had an error."
    reconnects = [f"Reconnecting... {n}/5 ({message})" for n in range(1, 6)]
    assert [e["message"] for e in done.of_type("error")] == [*reconnects, message]
    assert done.of_type("turn.failed") == [{"type": "turn.failed", "error": {"message": message}}]
    assert len(endpoint.requests()) == 6


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A directory of the machine's outside /tmp (and outside the checkout, which may lie
    under /tmp): where the sandbox must not let the agent write."""
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="everdict-outside-") as made:
        yield Path(made)


def test_version_is_on_stdout_and_a_home_under_tmp_warns_on_stderr(home: AgentHome) -> None:
    done = run([str(CODEX_BIN), "--version"], cwd=home.home, env=codex_env(home))
    assert (done.returncode, done.stdout, done.stderr) == (0, f"codex-cli {CODEX.version}\n", "")

    with tempfile.TemporaryDirectory(dir="/tmp") as temporary:
        under_tmp = Path(temporary) / "codex"
        under_tmp.mkdir()
        env = base_env(home, CODEX_HOME=str(under_tmp), TMPDIR="/tmp")
        warned = run([str(CODEX_BIN), "--version"], cwd=home.home, env=env)
    assert (warned.returncode, warned.stdout) == (0, f"codex-cli {CODEX.version}\n")
    assert warned.stderr == (
        "WARNING: proceeding, even though we could not create PATH aliases: Refusing to create "
        f'helper binaries under temporary dir "/tmp" (codex_home: AbsolutePathBuf("{under_tmp}"))\n'
    )
