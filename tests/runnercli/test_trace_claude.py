"""Claude Code's stream-json stdout as a trace: steps, pairing, durations, output and usage."""

from __future__ import annotations

import json

from runnercli.case.trace import ClaudeStreamParser, CurrentStep, TraceBatcher, stream_parser
from tests.runnercli.recorded import T0, every_split, feed_at, recorded_lines

SESSION = recorded_lines("claude_stream.jsonl")
# When each line of the session arrived, in seconds after T0.
ARRIVALS = [0, 2, 3, 43, 45, 46, 46.2, 50, 50.5, 52, 58, 60, 60]


def test_the_session_gives_each_step_with_its_tool_and_kind() -> None:
    drafts = feed_at(ClaudeStreamParser(), SESSION, ARRIVALS)
    assert [(d.kind, d.name) for d in drafts] == [
        ("message", "init"),
        ("message", "assistant"),
        ("tool_call", "Bash"),
        ("tool_result", "Bash"),
        ("message", "thinking"),
        ("tool_call", "Read"),
        ("tool_result", "Read"),
        ("tool_call", "Edit"),
        ("tool_result", "Edit"),
        ("tool_call", "Bash"),
        ("tool_result", "Bash"),
        ("message", "assistant"),
        ("usage", "result"),
    ]
    assert drafts[0].data["model"] == "claude-sonnet-4-5-20250929"
    assert drafts[1].data == {"text": "I'll run the test suite first to see what fails."}
    assert drafts[2].data == {
        "id": "toolu_01Kq8XvB2mN5rT7yP3wD9fGh",
        "input": {"command": "npm test", "description": "Run the test suite"},
    }
    assert drafts[4].data["text"].startswith("2 + 3 gives -1")
    assert [d.ts - T0 for d in drafts[2:4]] == [3000, 43000]


def test_tool_results_are_paired_to_their_calls_with_the_time_between() -> None:
    drafts = feed_at(ClaudeStreamParser(), SESSION, ARRIVALS)
    calls = {d.data["id"]: d for d in drafts if d.kind == "tool_call"}
    results = [d for d in drafts if d.kind == "tool_result"]
    assert [(r.name, r.data["duration_ms"], r.data["is_error"]) for r in results] == [
        ("Bash", 40_000, True),
        ("Read", 200, False),
        ("Edit", 500, False),
        ("Bash", 6_000, False),
    ]
    for result in results:
        assert calls[result.data["call_id"]].name == result.name
    assert "AssertionError" in results[0].data["content"]
    # Content given as blocks is kept as their text.
    assert results[2].data["content"].startswith("The file /home/dev/src/calc/src/sum.js")


def test_the_final_result_is_the_output_and_its_usage_and_cost_the_usage() -> None:
    parser = stream_parser("claude-stream-json")
    assert isinstance(parser, ClaudeStreamParser)
    assert parser.final_output() is None and parser.final_usage() is None
    drafts = feed_at(parser, SESSION, ARRIVALS)
    assert parser.final_output() == (
        "Fixed: `sum` subtracted its arguments. It now adds them, and both tests pass."
    )
    assert parser.final_usage() == {
        "input_tokens": 28,
        "output_tokens": 446,
        "cache_creation_input_tokens": 6273,
        "cache_read_input_tokens": 77477,
        "total_cost_usd": 0.0873215,
        "duration_ms": 41873,
        "duration_api_ms": 38210,
        "num_turns": 9,
    }
    summary = drafts[-1].data
    assert summary["total_cost_usd"] == 0.0873215
    assert summary["usage"]["output_tokens"] == 446
    assert summary["subtype"] == "success" and summary["is_error"] is False


def test_output_and_usage_survive_a_trace_cut_by_its_bounds() -> None:
    parser = ClaudeStreamParser()
    batcher = TraceBatcher(max_events=5)
    for line, at in zip(SESSION, ARRIVALS, strict=True):
        batcher.add(parser.feed(line, T0 + int(at * 1000)))
    dropped = batcher.finish(T0 + 61_000)
    assert batcher.next_seq == 5
    assert [(e.seq, e.kind) for e in dropped] == [(4, "dropped")]
    assert dropped[0].data["count"] == 9
    assert (parser.final_output() or "").startswith("Fixed: `sum` subtracted")
    assert (parser.final_usage() or {})["total_cost_usd"] == 0.0873215


def test_any_split_of_the_stream_gives_the_same_events() -> None:
    stream = b"".join(SESSION)
    whole = ClaudeStreamParser()
    expected = whole.feed(stream, T0) + whole.finish(T0)
    assert len(expected) == 13
    for cut, drafts in every_split(ClaudeStreamParser, stream):
        assert drafts == expected, f"split at byte {cut}"


def test_a_stream_fed_byte_by_byte_splits_no_character() -> None:
    parser = ClaudeStreamParser()
    drafts = [d for byte in b"".join(SESSION) for d in parser.feed(bytes([byte]), T0)]
    assert "✖ sum adds two numbers" in drafts[3].data["content"]
    assert parser.final_output() is not None


def test_an_error_result_is_an_error_event_with_usage_and_no_output() -> None:
    parser = ClaudeStreamParser()
    line = {
        "type": "result",
        "subtype": "error_max_turns",
        "is_error": True,
        "duration_ms": 9000,
        "num_turns": 3,
        "total_cost_usd": 0.012,
        "usage": {"input_tokens": 10, "output_tokens": 20},
        "errors": ["Reached maximum number of turns (3)"],
    }
    drafts = parser.feed(json.dumps(line).encode() + b"\n", T0)
    assert [(d.kind, d.name) for d in drafts] == [("usage", "result"), ("error", "error_max_turns")]
    assert drafts[1].data["errors"] == ["Reached maximum number of turns (3)"]
    assert parser.final_output() is None
    assert parser.final_usage() == {
        "input_tokens": 10,
        "output_tokens": 20,
        "total_cost_usd": 0.012,
        "duration_ms": 9000,
        "num_turns": 3,
    }


def test_unknown_and_malformed_lines_are_raw_events_and_partial_messages_skipped() -> None:
    parser = ClaudeStreamParser()
    stream = (
        b'{"type":"stream_event","event":{"type":"content_block_delta"}}\n'
        b'{"type":"telemetry","value":1}\n'
        b'{"type":"assistant","message":{"content":[{"type":"text","text":"ok"}]}\n'
        b"[1, 2]\n"
        b"\n"
        b'{"type":"assistant","message":"not an object"}\n'
    )
    drafts = parser.feed(stream, T0)
    assert [(d.kind, d.name) for d in drafts] == [
        ("raw", "telemetry"),
        ("raw", "line"),
        ("raw", "line"),
        ("raw", "assistant"),
    ]
    assert drafts[0].data == {"event": {"type": "telemetry", "value": 1}}
    assert drafts[1].data["error"].startswith("not JSON")
    assert drafts[1].data["line"].startswith('{"type":"assistant"')
    assert drafts[2].data["error"] == "not a JSON object"


def test_a_failed_api_call_on_a_message_is_an_error_event() -> None:
    line = {
        "type": "assistant",
        "error": "rate_limit",
        "message": {"content": [{"type": "text", "text": "API Error: 429"}]},
    }
    drafts = ClaudeStreamParser().feed(json.dumps(line).encode() + b"\n", T0)
    assert [(d.kind, d.name, d.data) for d in drafts] == [
        ("message", "assistant", {"text": "API Error: 429"}),
        ("error", "assistant", {"error": "rate_limit"}),
    ]


def test_only_the_agents_streaming_formats_are_parsed() -> None:
    assert stream_parser("text") is None and stream_parser("json") is None


def test_a_long_malformed_line_keeps_only_its_head() -> None:
    parser = ClaudeStreamParser()
    (draft,) = parser.feed(b"{" + b"x" * 100_000 + b"\n", T0)
    assert draft.kind == "raw"
    assert len(draft.data["line"]) < 5000


def test_images_in_tool_results_are_noted_not_kept_as_base64() -> None:
    parser = ClaudeStreamParser()
    blob = "iVBORw0KGgo" * 1000
    call = {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "shot.png"}}
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": blob}}
    result = {"type": "tool_result", "tool_use_id": "t1", "content": [image]}
    lines = [
        {"type": "assistant", "message": {"content": [call]}},
        {"type": "user", "message": {"content": [result, image]}},
    ]
    drafts = parser.feed(b"".join(json.dumps(x).encode() + b"\n" for x in lines), T0)
    assert [(d.kind, d.name) for d in drafts] == [
        ("tool_call", "Read"),
        ("tool_result", "Read"),
        ("raw", "user:image"),
    ]
    assert drafts[1].data["content"] == "[image image/png, 11000 base64 chars]"
    assert blob not in json.dumps(drafts[2].data)


def test_a_result_for_an_unknown_call_and_a_subagent_step() -> None:
    parser = ClaudeStreamParser()
    orphan = {"type": "tool_result", "tool_use_id": "toolu_gone", "content": "done"}
    sub = {"type": "text", "text": "searching"}
    lines = [
        {"type": "user", "message": {"content": [orphan]}},
        {"type": "assistant", "parent_tool_use_id": "toolu_task", "message": {"content": [sub]}},
    ]
    drafts = parser.feed(b"".join(json.dumps(x).encode() + b"\n" for x in lines), T0)
    assert drafts[0].name == "tool" and "duration_ms" not in drafts[0].data
    assert drafts[1].data == {"text": "searching", "parent_tool_use_id": "toolu_task"}


def test_the_current_step_follows_the_session() -> None:
    parser = ClaudeStreamParser()
    batcher = TraceBatcher()
    step = CurrentStep()
    seen = []
    for line, at in zip(SESSION, ARRIVALS, strict=True):
        ts = T0 + int(at * 1000)
        step.observe(batcher.add(parser.feed(line, ts)))
        seen.append(step.summary(ts + 1000))
    assert step.summary(T0 + 40_000) == "done"
    assert seen == [
        "thinking",
        "writing",
        "Bash `npm test` · 1 s",
        "thinking",
        "thinking",
        "Read `/home/dev/src/calc/src/sum.js` · 1 s",
        "thinking",
        "Edit `/home/dev/src/calc/src/sum.js` · 1 s",
        "thinking",
        "Bash `npm test` · 1 s",
        "thinking",
        "writing",
        "done",
    ]
    step.observe(batcher.add(parser.feed(SESSION[2], T0)))
    assert step.summary(T0 + 40_000) == "Bash `npm test` · 40 s"
    assert parser.open_calls() == ["Bash"]
