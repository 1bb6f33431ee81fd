"""`$EVERDICT_TRACE_FILE` followed while the harness writes it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from runnercli.case.trace import CurrentStep, Draft, TraceBatcher, TraceFileFollower
from runnercli.case.trace.tracefile import TraceLineParser
from tests.runnercli.recorded import T0

WRITER = textwrap.dedent(
    """
    import json, sys, time
    path, count = sys.argv[1], int(sys.argv[2])
    with open(path, "a", encoding="utf-8") as out:
        for i in range(count):
            line = json.dumps({"kind": "message", "name": "step", "data": {"i": i, "pad": "é" * i}})
            half = len(line) // 2
            out.write(line[:half]); out.flush()   # a partial line the reader must hold back
            time.sleep(0.002)
            out.write(line[half:] + "\\n"); out.flush()
            if i % 10 == 0:
                time.sleep(0.01)
        out.write(json.dumps({"kind": "usage", "name": "total", "data": {"n": count}}))
        out.flush()   # the last line has no newline
    """
)


def append(path: Path, text: str) -> None:
    with path.open("a", encoding="utf-8") as out:
        out.write(text)


def test_a_file_written_by_a_running_process_is_read_whole_and_in_order(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    follower = TraceFileFollower(path)
    batcher = TraceBatcher()
    assert follower.poll() == []  # not there yet
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "300"])
    polls_with_events = 0
    while writer.poll() is None:
        kept = batcher.add(follower.poll())
        polls_with_events += bool(kept)
        time.sleep(0.003)
    assert writer.wait() == 0
    batcher.add(follower.finish())
    events = []
    while batch := batcher.next_batch():
        events += batch
        batcher.acknowledge(batch[-1].seq)
    assert polls_with_events > 1  # read while it was being written, not only at the end
    assert [e.seq for e in events] == list(range(301))
    assert [e.data["i"] for e in events[:300]] == list(range(300))
    assert all(e.data["pad"] == "é" * e.data["i"] for e in events[:300])
    assert (events[-1].kind, events[-1].name, events[-1].data) == ("usage", "total", {"n": 300})


def test_a_partial_line_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    follower = TraceFileFollower(path)
    append(path, '{"kind": "message", "name": "a"}\n{"kind": "tool_call", "na')
    assert [d.name for d in follower.poll(T0)] == ["a"]
    assert follower.poll(T0) == []
    append(path, 'me": "Bash", "data": {"input": {"command": "make"}}}\n')
    (draft,) = follower.poll(T0 + 5)
    assert (draft.kind, draft.name, draft.data, draft.ts) == (
        "tool_call",
        "Bash",
        {"input": {"command": "make"}},
        T0 + 5,
    )


def test_a_truncated_or_replaced_file_is_read_again_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    follower = TraceFileFollower(path)
    append(path, '{"kind": "message", "name": "one"}\n{"kind": "message", "name": "two"}\n')
    assert [d.name for d in follower.poll(T0)] == ["one", "two"]
    path.write_text('{"kind": "message", "name": "three"}\n')  # truncated, shorter
    drafts = follower.poll(T0)
    assert [(d.kind, d.name) for d in drafts] == [("raw", "trace-file"), ("message", "three")]
    assert "truncated or replaced" in drafts[0].data["error"]
    replacement = tmp_path / "new.jsonl"
    replacement.write_text('{"kind": "message", "name": "four"}\n' * 3)
    os.replace(replacement, path)  # a new file, longer than what was read
    assert [d.name for d in follower.poll(T0)] == ["trace-file", "four", "four", "four"]


def test_lines_become_events_and_bad_lines_raw(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    lines = [
        {"kind": "message", "name": "plan", "data": {"text": "go"}, "ts": T0 - 5000},
        {"kind": "tool_result", "name": "Bash", "seq": 99, "exit_code": 0},
        {"kind": "usage", "data": [1, 2]},
        {"kind": "dropped", "name": "x"},
        {"kind": "telemetry"},
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + "not json\n\n")
    drafts = TraceFileFollower(path).poll(T0)
    assert [(d.kind, d.name, d.ts) for d in drafts] == [
        ("message", "plan", T0 - 5000),
        ("tool_result", "Bash", T0),
        ("usage", "", T0),
        ("raw", "trace-file", T0),
        ("raw", "trace-file", T0),
        ("raw", "line", T0),
    ]
    assert drafts[1].data == {"exit_code": 0}  # the runner numbers events: `seq` is not data
    assert drafts[2].data == {"value": [1, 2]}
    assert drafts[3].data["error"] == "unknown kind 'dropped'"
    assert drafts[4].data["event"] == {"kind": "telemetry"}
    assert drafts[5].data["line"] == "not json"


def test_finish_reads_the_rest_and_a_last_line_without_newline(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    follower = TraceFileFollower(path, max_read_bytes=64)
    path.write_text(
        "".join(json.dumps({"kind": "message", "name": f"m{i}"}) + "\n" for i in range(20))
        + '{"kind": "error", "name": "last"}'
    )
    drafts = follower.poll(T0)
    assert 0 < len(drafts) < 20  # one look reads at most max_read_bytes
    drafts += follower.finish(T0)
    assert [d.name for d in drafts] == [f"m{i}" for i in range(20)] + ["last"]


def test_a_line_over_the_limit_is_raw_and_the_next_one_read(tmp_path: Path) -> None:
    parser = TraceLineParser(max_line_bytes=1000)
    long_line = json.dumps({"kind": "message", "data": {"text": "w" * 5000}}).encode()
    drafts = parser.feed(long_line[:3000], T0) + parser.feed(long_line[3000:] + b"\n", T0)
    drafts += parser.feed(b'{"kind": "message", "name": "after"}\n', T0)
    assert [(d.kind, d.name) for d in drafts] == [("raw", "line"), ("message", "after")]
    assert drafts[0].data["bytes"] == len(long_line)
    assert drafts[0].data["error"] == f"line of {len(long_line)} bytes, over 1000"
    assert drafts[0].data["line"].startswith('{"kind": "message"')


def test_the_current_step_pairs_calls_without_ids_by_name() -> None:
    step = CurrentStep()
    batcher = TraceBatcher()
    assert step.summary(T0) == "starting"
    step.observe(
        batcher.add(
            [
                Draft("tool_call", "browser.goto", {"url": "http://127.0.0.1:3000/"}, T0),
                Draft("tool_call", "Bash", {"command": "npm run dev"}, T0 + 1000),
            ]
        )
    )
    assert step.summary(T0 + 3_726_000) == "Bash `npm run dev` · 1 h 2 min"
    step.observe(batcher.add([Draft("tool_result", "Bash", {}, T0 + 2000)]))
    assert step.summary(T0 + 125_000) == "browser.goto `http://127.0.0.1:3000/` · 2 min 5 s"
    step.observe(batcher.add([Draft("error", "crash", {}, T0 + 2000)]))
    assert step.summary(T0 + 125_000).startswith("browser.goto")  # the call is still open
    step.observe(batcher.add([Draft("tool_result", "browser.goto", {}, T0 + 3000)]))
    assert step.summary(T0 + 125_000) == "thinking"
    step.observe(batcher.add([Draft("error", "crash", {}, T0 + 4000)]))
    assert step.summary(T0 + 125_000) == "error: crash"
