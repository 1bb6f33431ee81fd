"""A running case's trace: events parsed from the agent's stdout or the harness's trace file,
numbered, redacted and bounded on this machine, and sent in acknowledged batches.

One case, as a stage runs it::

    parser = stream_parser(spec.output)          # None unless the stdout is a trace
    follower = TraceFileFollower(trace_file)     # `$EVERDICT_TRACE_FILE`
    batcher, step = TraceBatcher(redact=redactor), CurrentStep()
    # as stdout streams, and on every tick
    step.observe(batcher.add(parser.feed(chunk)))
    step.observe(batcher.add(follower.poll()))
    # the sender: one batch at a time, until the server has them all
    batch = batcher.next_batch()                 # `report_case_trace(events=batch)`
    batcher.acknowledge(reply.last_seq)
    # when the case has ended: the rest, then the one `dropped` event if the bounds cut it
    batcher.add(parser.finish() + follower.finish()); batcher.finish()
    output, usage = parser.final_output(), parser.final_usage()
    error = parser.final_error()                 # the model API's error that ended it, if one
"""

from __future__ import annotations

from typing import Any, Protocol

from runnercli.case.trace.batches import Redactor, TraceBatcher
from runnercli.case.trace.claude import ClaudeStreamParser
from runnercli.case.trace.codex import CodexJsonParser
from runnercli.case.trace.events import (
    MAX_TRACE_BYTES,
    MAX_TRACE_EVENTS,
    TRACE_KINDS,
    Draft,
    TraceEvent,
    TraceKind,
)
from runnercli.case.trace.tracefile import TraceFileFollower
from runnercli.protocol.steps import CurrentStep

__all__ = [
    "MAX_TRACE_BYTES",
    "MAX_TRACE_EVENTS",
    "OUTPUT_PARSERS",
    "TRACE_KINDS",
    "ClaudeStreamParser",
    "CodexJsonParser",
    "CurrentStep",
    "Draft",
    "Redactor",
    "StreamParser",
    "TraceBatcher",
    "TraceEvent",
    "TraceFileFollower",
    "TraceKind",
    "stream_parser",
]


class StreamParser(Protocol):
    """An agent's stdout format: bytes in, drafts out; the final output and usage at the end,
    and the error that ended the session when one did."""

    def feed(self, chunk: bytes, ts: int | None = None) -> list[Draft]: ...
    def finish(self, ts: int | None = None) -> list[Draft]: ...
    def final_output(self) -> str | None: ...
    def final_usage(self) -> dict[str, Any] | None: ...
    def final_error(self) -> str | None: ...


# A harness's `output` → the parser of its stdout.
OUTPUT_PARSERS: dict[str, type[ClaudeStreamParser] | type[CodexJsonParser]] = {
    "claude-stream-json": ClaudeStreamParser,
    "codex-jsonl": CodexJsonParser,
}


def stream_parser(output: str) -> StreamParser | None:
    """A fresh parser for a harness's `output` format, or None when stdout is not a trace."""
    parser = OUTPUT_PARSERS.get(output)
    return parser() if parser is not None else None
