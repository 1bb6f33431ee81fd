"""The scripted model endpoints on the wire, without a CLI: the turn a conversation has
reached, a script chosen by a marker, an error served a number of times, what is recorded."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from runnercli.protocol.agents import (
    AGENT_CLIS,
    CLAUDE_CODE,
    CODEX,
    installed_problem,
    is_pinned,
    pinned_versions,
)
from runnercli.protocol.jsonl import json_lines
from tests.agentclis.anthropic_api import AnthropicEndpoint
from tests.agentclis.openai_api import ResponsesEndpoint
from tests.agentclis.scripted import HttpError, Text, ToolCall, Turn

pytestmark = pytest.mark.once


def post(url: str, body: Any) -> tuple[int, str]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def sse_data(stream: str) -> list[dict[str, Any]]:
    """The events' data, their lines split at CR or LF only, as the CLIs' clients read them."""
    return [json.loads(line[6:]) for line in json_lines(stream) if line.startswith("data: ")]


def messages(prompt: str, *replies: int) -> dict[str, Any]:
    """A Messages request: the prompt, then `replies` assistant turns each answered by a user."""
    history: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    for _ in replies:
        history += [{"role": "assistant", "content": "…"}, {"role": "user", "content": "ok"}]
    return {"model": "claude-sonnet-4-5", "stream": True, "messages": history}


def test_it_answers_the_turn_the_conversation_has_reached() -> None:
    script: list[Turn] = [ToolCall("Bash", {"command": "ls"}), Text("done")]
    with AnthropicEndpoint(script).serve() as endpoint:
        url = f"{endpoint.url}/v1/messages?beta=true"
        first, second = post(url, messages("go")), post(url, messages("go", 1))
        again = post(url, messages("go"))
        beyond = post(url, messages("go", 1, 2))

    events = sse_data(first[1])
    assert [e["type"] for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert events[1]["content_block"]["name"] == "Bash"
    assert json.loads(events[2]["delta"]["partial_json"]) == {"command": "ls"}
    assert events[4]["delta"]["stop_reason"] == "tool_use"
    assert sse_data(second[1])[2]["delta"] == {"type": "text_delta", "text": "done"}
    # A request sent again (a retry) gets the same answer.
    assert again == first
    assert beyond[0] == 400
    assert "the script has no turn 2" in beyond[1]
    assert len(endpoint.requests()) == 4


def test_a_marker_in_the_first_user_message_chooses_the_script() -> None:
    scripts = {
        "JUDGE:": [Text('{"pass": true, "score": 1, "reason": "right"}')],
        "CASE:": [Text("42")],
    }
    with AnthropicEndpoint(scripts).serve() as endpoint:
        url = f"{endpoint.url}/v1/messages"
        case = post(url, messages("CASE: what is six times seven?"))
        # A judge's prompt quotes the case's input: its own marker is looked for first.
        judge = post(url, messages("JUDGE: was this right? The case was: CASE: six times seven"))
        stranger = post(url, messages("something else"))

    assert sse_data(case[1])[2]["delta"]["text"] == "42"
    assert '"pass": true' in sse_data(judge[1])[2]["delta"]["text"]
    assert stranger[0] == 400


def test_an_error_served_a_number_of_times_gives_way_to_the_next_turn() -> None:
    busy = HttpError(529, {"type": "error", "error": {"type": "overloaded_error"}}, times=2)
    with AnthropicEndpoint([busy, Text("at last")]).serve() as endpoint:
        url = f"{endpoint.url}/v1/messages"
        statuses = [post(url, messages("go"))[0] for _ in range(3)]
    assert statuses == [529, 529, 200]


def test_the_responses_endpoint_counts_a_turn_per_run_of_model_items() -> None:
    patch = "*** Begin Patch\n*** End Patch\n"
    script: list[Turn] = [
        ToolCall("exec_command", {"cmd": "ls"}),
        ToolCall("apply_patch", patch),
        Text("ok"),
    ]
    with ResponsesEndpoint(script).serve() as endpoint:
        url = f"{endpoint.url}/v1/responses"
        user = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "go"}],
        }
        call = {"type": "function_call", "call_id": "c1", "name": "exec_command", "arguments": "{}"}
        output = {"type": "function_call_output", "call_id": "c1", "output": "a.txt"}
        reasoning = {"type": "reasoning", "summary": []}
        answers = [
            post(url, {"model": "gpt-5.5", "input": history})
            for history in ([user], [user, reasoning, call, output])
        ]

    first, second = (sse_data(text) for _, text in answers)
    assert [e["type"] for e in first] == [
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    assert first[2]["item"]["type"] == "function_call"
    assert json.loads(first[2]["item"]["arguments"]) == {"cmd": "ls"}
    assert second[2]["item"] == {
        "type": "custom_tool_call",
        "id": "ctc_scripted_1_0",
        "call_id": "call_scripted_1_0",
        "name": "apply_patch",
        "input": patch,
        "status": "completed",
    }
    assert first[-1]["response"]["usage"]["input_tokens_details"]["cached_tokens"] > 0


def test_every_request_is_recorded_with_its_headers() -> None:
    with AnthropicEndpoint([Text("hi")]).serve() as endpoint:
        request = urllib.request.Request(
            f"{endpoint.url}/v1/messages",
            data=json.dumps(messages("hello")).encode(),
            headers={"Authorization": "Bearer token", "Content-Type": "application/json"},
        )
        urllib.request.urlopen(request, timeout=10).read()
        post(f"{endpoint.url}/v1/elsewhere", {})

    [recorded] = endpoint.requests()
    assert recorded.headers["authorization"] == "Bearer token"
    assert "hello" in recorded.text
    assert [r.path for r in endpoint.received] == ["/v1/messages", "/v1/elsewhere"]


def test_the_pins_are_one_version_per_tool() -> None:
    assert pinned_versions() == {"claude": CLAUDE_CODE.version, "codex": CODEX.version}
    assert is_pinned("claude", f"{CLAUDE_CODE.version}\n") is True
    assert is_pinned("codex", "0.1.0") is False
    assert is_pinned("node", "22.0.0") is None
    assert [agent.cli for agent in AGENT_CLIS] == ["claude-code", "codex"]


def test_installed_problem_names_what_is_missing_or_another_version(tmp_path: Any) -> None:
    assert (
        installed_problem(tmp_path)
        == f"@anthropic-ai/claude-code is not installed under {tmp_path}"
    )
    for agent, version in ((CLAUDE_CODE, CLAUDE_CODE.version), (CODEX, "0.1.0")):
        manifest = tmp_path / "node_modules" / agent.package / "package.json"
        manifest.parent.mkdir(parents=True)
        manifest.write_text(json.dumps({"version": version}))
    machine = ("linux", "x86_64")
    claude = CLAUDE_CODE.binary(tmp_path, machine=machine)
    assert str(claude).endswith("node_modules/@anthropic-ai/claude-code-linux-x64/claude")
    assert installed_problem(tmp_path).startswith(  # type: ignore[union-attr]
        f"{CLAUDE_CODE.npm_spec} has no native binary at"
    )
    here = CLAUDE_CODE.binary(tmp_path)
    here.parent.mkdir(parents=True, exist_ok=True)
    here.write_text("#!/bin/sh\n")
    here.chmod(0o755)
    assert installed_problem(tmp_path) == (
        f"@openai/codex 0.1.0 is installed under {tmp_path}, not {CODEX.version}"
    )
    with pytest.raises(LookupError, match="ships no native binary for sunos sparc"):
        CODEX.binary(tmp_path, machine=("sunos", "sparc"))
