"""Trace events numbered, redacted, bounded and sent in acknowledged batches."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import ValidationError

from runnercli.case.trace import Draft, TraceBatcher, TraceEvent
from runnercli.case.trace.events import MAX_TRACE_EVENT_BYTES, bounded_data, encode, event_from
from tests.runnercli.recorded import T0

SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c"


def redact(text: str) -> str:
    return re.sub(r"sk-live-[0-9a-f]+", "[redacted]", text)


def drafts(count: int, pad: int = 0) -> list[Draft]:
    return [Draft("message", "assistant", {"i": i, "pad": "x" * pad}, T0 + i) for i in range(count)]


def sent(batcher: TraceBatcher) -> list[list[TraceEvent]]:
    """Every batch the server would receive, each acknowledged in full."""
    batches = []
    while batch := batcher.next_batch():
        batches.append(batch)
        batcher.acknowledge(batch[-1].seq)
    return batches


def test_events_are_numbered_from_zero_and_batched_by_count() -> None:
    batcher = TraceBatcher()
    kept = batcher.add(drafts(450))
    assert [e.seq for e in kept] == list(range(450))
    batches = sent(batcher)
    assert [len(b) for b in batches] == [200, 200, 50]
    assert [e.seq for b in batches for e in b] == list(range(450))
    assert batcher.unacknowledged == 0


def test_batches_stay_under_their_byte_size() -> None:
    batcher = TraceBatcher()
    batcher.add(drafts(100, pad=10_000))
    batches = sent(batcher)
    assert len(batches) > 1
    for batch in batches:
        body = encode({"events": [e.model_dump(mode="json") for e in batch]})
        assert len(body) <= 256 * 1024
    assert sum(len(b) for b in batches) == 100


def test_unacknowledged_events_go_again_exactly() -> None:
    batcher = TraceBatcher(batch_events=10)
    batcher.add(drafts(25))
    first = batcher.next_batch()
    assert [e.seq for e in first] == list(range(10))
    assert batcher.next_batch() == first  # the call was lost: the same events again
    batcher.acknowledge(6)  # the server had stored only up to 6
    assert [e.seq for e in batcher.next_batch()] == list(range(7, 17))
    batcher.acknowledge(3)  # an older answer changes nothing
    assert batcher.acked_seq == 6
    assert batcher.next_batch()[0].seq == 7
    batcher.acknowledge(24)
    assert batcher.next_batch() == []
    batcher.add(drafts(1))
    assert [e.seq for e in batcher.next_batch()] == [25]


def test_every_string_in_name_and_data_is_redacted_before_it_leaves() -> None:
    batcher = TraceBatcher(redact=redact)
    data = {
        "input": {"command": f"curl -H 'Authorization: Bearer {SECRET}' api"},
        "env": [f"TOKEN={SECRET}", 3, None, True],
        SECRET: "a key",
    }
    (event,) = batcher.add([Draft("tool_call", f"call {SECRET}", data, T0)])
    assert event.name == "call [redacted]"
    assert event.data == {
        "input": {"command": "curl -H 'Authorization: Bearer [redacted]' api"},
        "env": ["TOKEN=[redacted]", 3, None, True],
        "[redacted]": "a key",
    }
    assert SECRET not in json.dumps(sent(batcher)[0][0].model_dump())


def test_redaction_comes_before_truncation_so_no_half_secret_leaves() -> None:
    limit = 1000
    # Placed so that the cut of the truncated head falls inside the secret.
    text = "y" * (limit // 2 - len('{"text":"') - 8) + SECRET + "z" * 5000
    unredacted = bounded_data({"text": text}, limit)
    assert SECRET[:8] in unredacted["head"] and SECRET not in unredacted["head"]
    batcher = TraceBatcher(redact=redact, max_event_bytes=limit)
    (event,) = batcher.add([Draft("tool_result", "Read", {"text": text}, T0)])
    assert event.data["truncated"] is True
    assert SECRET[:8] not in event.data["head"]


def test_an_event_over_the_size_limit_is_truncated_with_a_marker() -> None:
    big = {"content": "line\n" * 40_000, "quotes": '"' * 20_000}
    event = event_from(7, Draft("tool_result", "Read", big, T0))
    assert event.data["truncated"] is True
    assert event.data["bytes"] == len(encode(big))
    assert event.data["head"].startswith('{"content":"line\\nline')
    assert len(encode(event.data)) <= MAX_TRACE_EVENT_BYTES
    small = {"content": "short"}
    assert event_from(8, Draft("tool_result", "Read", small, T0)).data == small


def test_the_event_model_refuses_what_the_server_must_not_store() -> None:
    ok = {"seq": 0, "ts": T0, "kind": "message", "name": "assistant", "data": {"text": "hi"}}
    TraceEvent.model_validate(ok)
    for bad in (
        {**ok, "seq": -1},
        {**ok, "kind": "thought"},
        {**ok, "name": "n" * 101},
        {**ok, "data": {"text": "x" * MAX_TRACE_EVENT_BYTES}},
        {**ok, "attempt": 2},
        {**ok, "data": ["not", "an", "object"]},
    ):
        with pytest.raises(ValidationError):
            TraceEvent.model_validate(bad)


def test_a_long_name_is_cut_to_one_short_line() -> None:
    (event,) = TraceBatcher().add([Draft("message", "role\n" + "r" * 300, {}, T0)])
    assert len(event.name) == 100 and event.name.startswith("role r") and event.name[-1] == "…"


def test_past_the_event_bound_one_dropped_event_counts_the_rest() -> None:
    batcher = TraceBatcher(max_events=100)
    kept = batcher.add(drafts(250))
    assert len(kept) == 99
    assert [e.kind for e in batcher.finish(T0 + 999)] == ["dropped"]
    events = [e for b in sent(batcher) for e in b]
    assert [e.seq for e in events] == list(range(100))
    dropped = events[-1]
    assert (dropped.kind, dropped.ts) == ("dropped", T0 + 999)
    assert dropped.data["count"] == 151
    assert dropped.data["message"] == "… 151 events dropped"
    with pytest.raises(RuntimeError):
        batcher.add(drafts(1))


def test_past_the_byte_bound_the_trace_is_cut_and_says_so() -> None:
    batcher = TraceBatcher(max_bytes=50_000)
    batcher.add(drafts(30, pad=3000))
    batcher.add([Draft("message", "tiny", {}, T0)])  # would fit, but the trace is already cut
    (dropped,) = batcher.finish(T0)
    assert batcher.recorded_bytes <= 50_000
    assert dropped.seq == batcher.next_seq - 1
    assert dropped.data["count"] == 31 - dropped.seq
    assert dropped.data["bytes"] > 0
    assert batcher.finish(T0) == []  # once


def test_a_trace_within_its_bounds_ends_with_no_dropped_event() -> None:
    batcher = TraceBatcher(max_events=100)
    batcher.add(drafts(99))
    assert batcher.finish(T0) == []
    assert batcher.next_seq == 99
