"""Codex's `exec --json` stdout as a trace: items paired, durations, output and summed usage."""

from __future__ import annotations

import json

from runnercli.case.trace import CodexJsonParser, CurrentStep, TraceBatcher, stream_parser
from tests.runnercli.recorded import T0, every_split, feed_at, recorded_lines

SESSION = recorded_lines("codex_exec.jsonl")
ARRIVALS = [0, 0.1, 2, 2.5, 3, 43, 44, 47, 48, 55, 55.5, 57, 57]


def lines(*events: dict) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in events)


def test_the_session_gives_each_step_with_its_tool_and_kind() -> None:
    drafts = feed_at(CodexJsonParser(), SESSION, ARRIVALS)
    assert [(d.kind, d.name) for d in drafts] == [
        ("message", "thread"),
        ("message", "turn"),
        ("message", "thinking"),
        ("message", "todo_list"),
        ("tool_call", "shell"),
        ("tool_result", "shell"),
        ("message", "thinking"),
        ("tool_call", "apply_patch"),
        ("tool_result", "apply_patch"),
        ("tool_call", "shell"),
        ("tool_result", "shell"),
        ("message", "todo_list"),
        ("message", "assistant"),
        ("usage", "turn"),
    ]
    assert drafts[0].data == {"thread_id": "0199a213-81c0-7800-8aa1-bbab2a035a53"}
    assert drafts[4].data == {
        "id": "item_2",
        "type": "command_execution",
        "command": "bash -lc 'npm test'",
    }
    assert drafts[7].data["changes"] == [
        {"path": "/home/dev/src/calc/src/sum.js", "kind": "update"}
    ]


def test_a_command_is_paired_with_its_completion_and_the_time_it_took() -> None:
    drafts = feed_at(CodexJsonParser(), SESSION, ARRIVALS)
    results = [d for d in drafts if d.kind == "tool_result"]
    assert [
        (r.data["call_id"], r.data["duration_ms"], r.data["is_error"], r.data["status"])
        for r in results
    ] == [
        ("item_2", 40_000, True, "failed"),
        ("item_4", 0, False, "completed"),
        ("item_5", 7_000, False, "completed"),
    ]
    assert results[0].data["exit_code"] == 1
    assert "✖ sum adds two numbers" in results[0].data["output"]
    assert results[2].data["exit_code"] == 0


def test_the_last_agent_message_is_the_output_and_usage_sums_the_turns() -> None:
    parser = stream_parser("codex-jsonl")
    assert isinstance(parser, CodexJsonParser)
    feed_at(parser, SESSION, ARRIVALS)
    assert parser.final_output() == (
        "Fixed `sum` in src/sum.js: it subtracted instead of adding. Both tests pass now."
    )
    assert parser.final_usage() == {
        "input_tokens": 24763,
        "cached_input_tokens": 24448,
        "output_tokens": 122,
    }
    parser.feed(
        lines(
            {"type": "turn.started"},
            {"type": "item.completed", "item": {"id": "i9", "type": "agent_message", "text": "2"}},
            {
                "type": "turn.completed",
                "usage": {"input_tokens": 100, "cached_input_tokens": 0, "output_tokens": 5},
            },
        ),
        T0,
    )
    assert parser.final_output() == "2"
    assert parser.final_usage() == {
        "input_tokens": 24863,
        "cached_input_tokens": 24448,
        "output_tokens": 127,
    }


def test_any_split_of_the_stream_gives_the_same_events() -> None:
    stream = b"".join(SESSION)
    whole = CodexJsonParser()
    expected = whole.feed(stream, T0) + whole.finish(T0)
    assert len(expected) == 14
    for cut, drafts in every_split(CodexJsonParser, stream):
        assert drafts == expected, f"split at byte {cut}"


def test_failures_are_error_events() -> None:
    parser = CodexJsonParser()
    drafts = parser.feed(
        lines(
            {"type": "item.completed", "item": {"id": "e1", "type": "error", "message": "warn"}},
            {"type": "turn.failed", "error": {"message": "stream disconnected"}},
            {"type": "error", "message": "Reconnecting... 1/5"},
        ),
        T0,
    )
    assert [(d.kind, d.name, d.data["message"]) for d in drafts] == [
        ("error", "error", "warn"),
        ("error", "turn.failed", "stream disconnected"),
        ("error", "error", "Reconnecting... 1/5"),
    ]
    assert parser.final_output() is None and parser.final_usage() is None


def test_mcp_and_web_search_items_are_tool_calls() -> None:
    parser = CodexJsonParser()
    mcp = {
        "id": "m1",
        "type": "mcp_tool_call",
        "server": "docs",
        "tool": "search",
        "arguments": {"query": "asyncio"},
        "status": "in_progress",
    }
    done = {**mcp, "status": "completed", "result": {"content": [], "structured_content": None}}
    search = {"id": "w1", "type": "web_search", "query": "node test runner", "action": {}}
    drafts = parser.feed(
        lines(
            {"type": "item.started", "item": mcp},
            {"type": "item.completed", "item": done},
            {"type": "item.started", "item": search},
        ),
        T0,
    )
    assert [(d.kind, d.name) for d in drafts] == [
        ("tool_call", "docs.search"),
        ("tool_result", "docs.search"),
        ("tool_call", "web_search"),
    ]
    assert drafts[0].data["arguments"] == {"query": "asyncio"}
    assert drafts[1].data["is_error"] is False
    step = CurrentStep()
    step.observe(TraceBatcher().add(drafts))
    assert step.summary(T0 + 3000) == "web_search `node test runner` · 3 s"


def test_unknown_events_and_items_and_bad_lines_are_raw() -> None:
    parser = CodexJsonParser()
    drafts = parser.feed(
        lines(
            {"type": "session.configured", "model": "gpt-5-codex"},
            {"type": "item.completed", "item": {"id": "x1", "type": "hologram", "n": 1}},
            {"type": "item.updated", "item": {"id": "c1", "type": "agent_message", "text": "…"}},
        )
        + b'{"type": "turn.started"\n',
        T0,
    )
    assert [(d.kind, d.name) for d in drafts] == [
        ("raw", "session.configured"),
        ("raw", "item:hologram"),
        ("raw", "line"),
    ]
    assert drafts[1].data == {"item": {"id": "x1", "type": "hologram", "n": 1}}
    assert "not JSON" in drafts[2].data["error"]


def test_the_current_step_shows_the_running_command() -> None:
    parser = CodexJsonParser()
    step = CurrentStep()
    batcher = TraceBatcher()
    for line, at in zip(SESSION[:5], ARRIVALS[:5], strict=True):
        step.observe(batcher.add(parser.feed(line, T0 + int(at * 1000))))
    assert step.summary(T0 + 43_000) == "shell `npm test` · 40 s"
    step.observe(batcher.add(parser.feed(SESSION[5], T0 + 43_000)))
    assert step.summary(T0 + 43_000) == "thinking"
