"""The Trace stage in a case's pipeline: a real harness process, the real Prepare, Execute
and Collect stages, and a fake of the server's trace tool that stores each seq once.

What it must do: parse an agent's stdout stream as it comes (the final result becomes the
output and the usage), follow the trace file while the case runs, send every event exactly
once whatever the connection does, stop when the lease is gone, keep what the server could
not take on disk, and send nothing with `--no-trace`.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from runnercli.case.collect import Collect
from runnercli.case.execute import Execute
from runnercli.case.pipeline import CaseContext, Pipeline, Stage
from runnercli.case.prepare import Prepare
from runnercli.case.trace.outbox import TraceOutbox
from runnercli.case.trace.stage import Trace
from runnercli.client import ServerUnavailable
from runnercli.protocol import CaseJob, HarnessSpec, TraceAck, TraceEvent, harness_digest
from runnercli.text.redact import Redactor
from tests.runnercli.fakes import FakeClient, fake_session, held

FIXTURES = Path(__file__).parent / "fixtures"


class TraceServer(FakeClient):
    """Answers `report_case_trace` as the server does: each seq stored once, the ack's
    `last_seq` the highest held with every one before it. `faults` are raised first, in
    order; a fault `("stored", exc)` stores the batch and then loses the answer."""

    def __init__(self) -> None:
        super().__init__()
        self.stored: dict[int, dict[str, Any]] = {}
        self.faults: list[Any] = []
        self.refuse: str | None = None

    async def call(self, tool: str, args: dict[str, Any], model: Any, wait_s: float = 0.0) -> Any:
        self.calls.append((tool, args))
        if tool != "report_case_trace":
            return model(accepted=True)
        fault = self.faults.pop(0) if self.faults else None
        if fault is not None and not isinstance(fault, tuple):
            raise fault
        if self.refuse is not None:
            return TraceAck(accepted=False, reason=self.refuse)
        for event in args["events"]:
            if event["seq"] == self.last_seq + 1:
                self.stored[event["seq"]] = event
        if fault is not None:
            raise fault[1]
        return TraceAck(accepted=True, last_seq=self.last_seq)

    @property
    def last_seq(self) -> int:
        return max(self.stored, default=-1)

    def sent_seqs(self) -> list[int]:
        return [e["seq"] for _, a in self.calls if _ == "report_case_trace" for e in a["events"]]


def job(command: list[str], **spec: Any) -> CaseJob:
    parsed = HarnessSpec.model_validate({"command": command, "timeout_s": 30, **spec})
    return CaseJob.model_validate(
        {
            "job_id": 7,
            "attempt_id": 1,
            "lease_epoch": 1,
            "run_id": 1,
            "workspace": "acme",
            "submitted_by": "alice",
            "case": {"key": "c1", "input": {}},
            "harness": {
                "name": "agent",
                "version": 1,
                "digest": harness_digest(parsed),
                "author": "alice",
                "spec": parsed.model_dump(mode="json"),
            },
            "capabilities": ["python"],
            "timeout_s": 30,
        }
    )


def harness(tmp_path: Path, source: str) -> list[str]:
    path = tmp_path / "harness.py"
    path.write_text(textwrap.dedent(source))
    return [sys.executable, str(path)]


REPLAY = """
    import sys, time
    for line in open(sys.argv[1], encoding="utf-8"):
        if line.strip() and not line.startswith("#"):
            sys.stdout.write(line)
            sys.stdout.flush()
            time.sleep(0.01)
"""


def run_case(case_job: CaseJob, trace: Trace, notes: list[str] | None = None) -> CaseContext:
    case = CaseContext(held(case_job), notes=[notes.append] if notes is not None else [])
    stages: list[Stage] = [Prepare(), trace, Execute(), Collect()]
    asyncio.run(Pipeline(stages).run(case))
    return case


def stage(client: TraceServer, **kwargs: Any) -> Trace:
    return Trace(client, tick_s=0.05, patience_s=kwargs.pop("patience_s", 5.0), **kwargs)


@pytest.mark.parametrize(
    ("fixture", "output", "final", "usage"),
    [
        (
            "claude_stream.jsonl",
            "claude-stream-json",
            "Fixed: `sum` subtracted its arguments. It now adds them, and both tests pass.",
            {
                "input_tokens": 28,
                "output_tokens": 446,
                "cache_creation_input_tokens": 6273,
                "cache_read_input_tokens": 77477,
                "total_cost_usd": 0.0873215,
                "duration_ms": 41873,
                "duration_api_ms": 38210,
                "num_turns": 9,
            },
        ),
        (
            "codex_exec.jsonl",
            "codex-jsonl",
            "Fixed `sum` in src/sum.js: it subtracted instead of adding. Both tests pass now.",
            {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122},
        ),
    ],
)
def test_an_agents_stream_becomes_the_trace_the_output_and_the_usage(
    tmp_path: Path, fixture: str, output: str, final: str, usage: dict[str, Any]
) -> None:
    client = TraceServer()
    case_job = job([*harness(tmp_path, REPLAY), str(FIXTURES / fixture)], output=output)
    case = run_case(case_job, stage(client))
    assert case.result is not None and case.result.status == "completed"
    assert case.result.output == final
    assert case.result.usage == usage
    stored = [client.stored[seq] for seq in sorted(client.stored)]
    assert [e["seq"] for e in stored] == list(range(len(stored)))
    calls = [e for e in stored if e["kind"] == "tool_call"]
    results = [e for e in stored if e["kind"] == "tool_result"]
    assert calls and len(calls) == len(results)
    assert all(r["data"]["duration_ms"] >= 0 for r in results)
    assert sorted(client.sent_seqs()) == sorted(set(client.sent_seqs()))


WRITES_TRACE_FILE = """
    import json, os, sys, time
    path, go = os.environ["EVERDICT_TRACE_FILE"], sys.argv[1]
    with open(path, "a") as trace:
        for n in range(3):
            trace.write(json.dumps({"kind": "tool_call", "name": "Bash",
                                    "data": {"id": f"t{n}", "command": f"step {n}"}}) + "\\n")
            trace.flush()
        trace.write('{"kind": "message", "name": "half a li')  # no newline yet
        trace.flush()
        while not os.path.exists(go):
            time.sleep(0.02)
        trace.write('ne"}\\n')
    print("done")
"""


def test_the_trace_file_is_sent_while_the_case_runs(tmp_path: Path) -> None:
    client = TraceServer()
    go = tmp_path / "go"
    case_job = job([*harness(tmp_path, WRITES_TRACE_FILE), str(go)])
    seen_while_running: list[int] = []

    async def scenario() -> CaseContext:
        case = CaseContext(held(case_job))
        pipeline = Pipeline([Prepare(), stage(client), Execute(), Collect()])
        running = asyncio.create_task(pipeline.run(case))
        while len(client.stored) < 3:
            assert not running.done()
            await asyncio.sleep(0.02)
        seen_while_running.extend(sorted(client.stored))
        go.touch()
        await running
        return case

    case = asyncio.run(scenario())
    assert seen_while_running == [0, 1, 2]
    assert case.result is not None and case.result.output == "done\n"
    assert [client.stored[s]["kind"] for s in sorted(client.stored)] == [
        "tool_call",
        "tool_call",
        "tool_call",
        "message",
    ]
    assert client.stored[3]["name"] == "half a line"
    assert "EVERDICT_TRACE_FILE" in case.env


def test_a_dropped_connection_loses_no_event_and_stores_none_twice(tmp_path: Path) -> None:
    client = TraceServer()
    # The first batch is stored but its answer is lost; the next two calls fail outright.
    client.faults = [("stored", ServerUnavailable("reset")), ServerUnavailable("refused")]
    client.faults.append(ServerUnavailable("refused"))
    case_job = job(
        [*harness(tmp_path, REPLAY), str(FIXTURES / "claude_stream.jsonl")],
        output="claude-stream-json",
    )
    run_case(case_job, stage(client))
    events = len(client.stored)
    assert events > 10
    assert sorted(client.stored) == list(range(events))
    # Events were sent again after the failures, and the server kept each once.
    assert len(client.sent_seqs()) > events


def test_a_lease_refused_stops_the_sending(tmp_path: Path) -> None:
    client = TraceServer()
    client.refuse = "stale lease: epoch 1 is no longer this runner's lease of the job"
    outbox_dir = tmp_path / "spool"
    outbox = TraceOutbox(fake_session(client), outbox_dir)
    case_job = job(
        [*harness(tmp_path, REPLAY), str(FIXTURES / "codex_exec.jsonl")], output="codex-jsonl"
    )
    case = run_case(case_job, stage(client, outbox=outbox))
    assert len([c for c in client.calls if c[0] == "report_case_trace"]) == 1
    assert not outbox_dir.exists() or not list(outbox_dir.glob("*"))
    assert case.result is not None and case.result.output.startswith("Fixed `sum`")


def test_what_the_server_could_not_take_waits_on_disk_and_goes_later(tmp_path: Path) -> None:
    client = TraceServer()
    client.faults = [ServerUnavailable("down")] * 1000
    spool = tmp_path / "spool"
    case_job = job(
        [*harness(tmp_path, REPLAY), str(FIXTURES / "claude_stream.jsonl")],
        output="claude-stream-json",
    )

    async def scenario() -> None:
        outbox = TraceOutbox(fake_session(client), spool)
        case = CaseContext(held(case_job))
        trace = stage(client, outbox=outbox, patience_s=0.2)
        await Pipeline([Prepare(), trace, Execute(), Collect()]).run(case)
        await outbox.close(patience_s=0.1)
        (kept,) = spool.glob("*.trace.jsonl")
        assert oct(kept.stat().st_mode & 0o777) == "0o600"
        head, *lines = kept.read_text().splitlines()
        assert json.loads(head)["job_id"] == 7
        assert [json.loads(line)["seq"] for line in lines] == list(range(len(lines)))
        # The server is back, and a new runner picks the trace up from the disk.
        client.faults.clear()
        again = TraceOutbox(fake_session(client), spool)
        again.resend_spooled()
        await again.close(patience_s=5)
        assert sorted(client.stored) == list(range(len(lines)))
        assert not list(spool.glob("*.trace.jsonl"))

    asyncio.run(scenario())


def test_a_kept_trace_whose_events_hold_line_separators_goes_whole(tmp_path: Path) -> None:
    # The kept file is JSON Lines written by pydantic, which leaves U+2028 and its kin raw.
    client = TraceServer()
    client.faults = [ServerUnavailable("down")] * 1000
    spool = tmp_path / "spool"
    said = "one\u2028two\u0085three\u2029four"
    events = [
        TraceEvent(seq=seq, ts=seq, kind="message", name="assistant", data={"text": said})
        for seq in range(3)
    ]

    async def scenario() -> None:
        outbox = TraceOutbox(fake_session(client), spool)
        outbox.keep(7, 1, "case a", events)
        await outbox.close(patience_s=0.1)
        (kept,) = spool.glob("*.trace.jsonl")
        assert "\u2028" in kept.read_text()
        client.faults.clear()
        again = TraceOutbox(fake_session(client), spool)
        again.resend_spooled()
        await again.close(patience_s=5)

    asyncio.run(scenario())
    assert [client.stored[seq]["data"]["text"] for seq in range(3)] == [said] * 3
    assert not list(spool.glob("*.trace.jsonl"))


def test_no_trace_keeps_it_here_and_still_reads_the_output(tmp_path: Path) -> None:
    client = TraceServer()
    case_job = job(
        [*harness(tmp_path, REPLAY), str(FIXTURES / "claude_stream.jsonl")],
        output="claude-stream-json",
    )
    case = run_case(case_job, stage(client, send=False))
    assert client.calls == []
    assert case.result is not None
    assert case.result.output.startswith("Fixed: `sum`")
    assert case.result.usage is not None and case.result.usage["total_cost_usd"] == 0.0873215


SECRET = """
    import json, os
    with open(os.environ["EVERDICT_TRACE_FILE"], "a") as trace:
        trace.write(json.dumps({"kind": "tool_call", "name": "Bash",
                                "data": {"command": "curl -H 'token: sk-live-1234'"}}) + "\\n")
"""


def test_events_are_redacted_before_they_leave(tmp_path: Path) -> None:
    client = TraceServer()
    redactor = Redactor([r"sk-live-[0-9]+"])
    case_job = job(harness(tmp_path, SECRET))
    run_case(case_job, stage(client, redact=redactor.text))
    (event,) = client.stored.values()
    assert event["data"]["command"] == "curl -H 'token: [redacted]'"
    assert "sk-live" not in json.dumps(client.calls)
