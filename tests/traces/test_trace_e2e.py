"""End to end: daphne, the scheduler and `python -m runnercli run` as real processes, a
harness replaying an agent's recorded event stream or writing a trace file as it works.

What a member sees through the API is checked: the timeline's steps and tool names, the
durations of the tool calls, the usage and cost of the case and the run; a trace file's events
while the case still runs; and after a runner killed with `kill -9` while its trace and its
result waited for a server that was down, every event once — none missing, none twice.
"""

from __future__ import annotations

import json
import signal
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from accounts.services import api_key_create
from runnercli.case.trace import stream_parser
from runners.models import AttemptStatus, JobAttempt
from scorecards.services import dataset_create, harness_create
from tests.live import LiveServer, daphne, free_port, runner_cli, scheduler
from tests.runnercli.test_e2e import Api

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

FIXTURES = Path(__file__).resolve().parent.parent / "runnercli" / "fixtures"
LEASE_TTL_S = 3
PAUSE_S = 0.15

# Replays a recorded session on stdout as the agent would print it, a pause between lines.
REPLAY = """
    import sys, time
    pause = float(sys.argv[2])
    for line in open(sys.argv[1], encoding="utf-8"):
        if line.strip() and not line.startswith("#"):
            sys.stdout.write(line)
            sys.stdout.flush()
            time.sleep(pause)
"""


def blob_env(tmp_path: Path) -> dict[str, Any]:
    location = json.dumps({"location": str(tmp_path / "blobs"), "allow_overwrite": True})
    return {"EVERDICT_BLOB_STORAGE_OPTIONS": location}


def server_env(tmp_path: Path) -> dict[str, Any]:
    return {
        "EVERDICT_LEASE_TTL_S": LEASE_TTL_S,
        "EVERDICT_QUEUE_IDLE_TIMEOUT_S": 120,
        **blob_env(tmp_path),
    }


@pytest.fixture
def api(workspace: Any, alice: Any, tmp_path: Path) -> Iterator[Api]:
    env = server_env(tmp_path)
    with daphne(tmp_path, **env) as server, scheduler(tmp_path, **env):
        yield Api(server, api_key_create(user=alice, name="trace").key)


def script(tmp_path: Path, name: str, source: str) -> str:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(source))
    return str(path)


def agent_harness(user: Any, tmp_path: Path, name: str, fixture: str, output: str) -> None:
    harness_create(
        user=user,
        workspace_slug="acme",
        name=name,
        spec={
            "command": [
                sys.executable,
                script(tmp_path, name, REPLAY),
                str(FIXTURES / fixture),
                str(PAUSE_S),
            ],
            "timeout_s": 60,
            "capabilities": ["python"],
            "output": output,
            "grader": {"type": "contains"},
        },
    )


def one_case(user: Any, name: str, expected: str, key: str = "fix-sum") -> None:
    dataset_create(
        user=user,
        workspace_slug="acme",
        name=name,
        cases=[{"key": key, "input": {}, "expected": expected}],
    )


def read_trace(api: Api, run_id: int, key: str) -> dict[str, Any]:
    """The whole trace through the API, a page at a time (as the case page reads it)."""
    first = api.ok("GET", f"/api/runs/{run_id}/trace?key={quote(key)}&limit=7")
    events = list(first["events"])
    after = first["next_after_seq"]
    while after is not None:
        page = api.ok("GET", f"/api/runs/{run_id}/trace?key={quote(key)}&after_seq={after}&limit=7")
        events += page["events"]
        after = page["next_after_seq"]
    return {**first, "events": events}


def expected_steps(fixture: str, output: str) -> list[tuple[str, str]]:
    """What the runner's own parser makes of the recording: the steps the page must show."""
    parser = stream_parser(output)
    assert parser is not None
    text = "".join(
        line
        for line in (FIXTURES / fixture).read_text().splitlines(keepends=True)
        if line.strip() and not line.startswith("#")
    )
    return [(d.kind, d.name) for d in parser.feed(text.encode()) + parser.finish()]


@pytest.mark.parametrize(
    ("fixture", "output", "final", "tools", "usage", "cost"),
    [
        (
            "claude_stream.jsonl",
            "claude-stream-json",
            "It now adds them, and both tests pass.",
            ["Bash", "Read", "Edit", "Bash"],
            {
                "input_tokens": 28,
                "output_tokens": 446,
                "cache_read_input_tokens": 77477,
                "cache_creation_input_tokens": 6273,
                "total_cost_usd": 0.0873215,
            },
            0.0873215,
        ),
        (
            "codex_exec.jsonl",
            "codex-jsonl",
            "Both tests pass now.",
            ["shell", "apply_patch", "shell"],
            {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122},
            0.0,
        ),
    ],
)
def test_a_recorded_agent_session_becomes_the_timeline_output_usage_and_cost(
    api: Api,
    alice: Any,
    tmp_path: Path,
    fixture: str,
    output: str,
    final: str,
    tools: list[str],
    usage: dict[str, Any],
    cost: float,
) -> None:
    agent_harness(alice, tmp_path, "agent", fixture, output)
    one_case(alice, "agent", final)
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = runner_cli(tmp_path, ["run", "--wait-ms", "2000"], name="laptop")
    try:
        run_id = api.start_run("agent", "agent", f"self:{runner_id}")
        run = api.wait_run(run_id)
    finally:
        runner.stop()
    assert run["status"] == "succeeded", (run, runner.output()[-2000:])
    (result,) = run["results"]
    assert result["verdict"] == "pass" and result["output"].endswith(final)
    assert result["usage"] == usage
    assert run["summary"]["cost_usd"] == pytest.approx(cost, abs=1e-6)

    trace = read_trace(api, run_id, "fix-sum")
    events = trace["events"]
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert [(e["kind"], e["name"]) for e in events] == expected_steps(fixture, output)
    calls = [e["name"] for e in events if e["kind"] == "tool_call"]
    assert calls == tools
    # Each tool call lasted as long as the agent took to answer it: a pause per line between
    # (Codex reports a file change only once it is made: it takes no time).
    results = [e for e in events if e["kind"] == "tool_result"]
    assert [e["name"] for e in results] == tools
    durations = [e["data"]["duration_ms"] for e in results if e["name"] != "apply_patch"]
    assert all(PAUSE_S * 1000 * 0.8 <= ms < 10_000 for ms in durations), durations
    assert trace["totals"]["tool_calls"] == len(tools)
    assert trace["running"] is False and trace["dropped"] == 0
    if cost:
        assert trace["totals"]["cost_usd"] == pytest.approx(0.0873215)
    assert trace["totals"]["output_tokens"] == usage["output_tokens"]


# Writes three tool calls to its trace file, waits to be told to go on, then two more events.
TRACE_FILE = """
    import json, os, sys, time
    go, pid_file = sys.argv[1], sys.argv[2]
    open(pid_file, "w").write(str(os.getpid()))
    def write(event):
        with open(os.environ["EVERDICT_TRACE_FILE"], "a") as trace:
            trace.write(json.dumps(event) + "\\n")
    for n in range(3):
        data = {"id": f"t{n}", "command": f"make {n}"}
        write({"kind": "tool_call", "name": "Bash", "data": data})
    given_up = time.monotonic() + 120
    while not os.path.exists(go):
        if time.monotonic() > given_up:
            sys.exit("never told to go on")
        time.sleep(0.05)
    write({"kind": "tool_result", "name": "Bash", "data": {"call_id": "t2", "duration_ms": 5}})
    write({"kind": "message", "name": "assistant", "data": {"text": "all built"}})
    print("built")
"""


def file_harness(user: Any, tmp_path: Path, go: Path) -> None:
    harness_create(
        user=user,
        workspace_slug="acme",
        name="builder",
        spec={
            "command": [
                sys.executable,
                script(tmp_path, "builder", TRACE_FILE),
                str(go),
                str(tmp_path / "builder.pid"),
            ],
            "timeout_s": 120,
            "capabilities": ["python"],
            "grader": {"type": "contains"},
        },
    )


def wait_events(api: Api, run_id: int, key: str, count: int, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        trace = api.ok("GET", f"/api/runs/{run_id}/trace?key={quote(key)}")
        if len(trace["events"]) >= count:
            return trace
        assert time.monotonic() < deadline, trace
        time.sleep(0.1)


def test_a_trace_file_shows_on_the_api_while_the_case_runs(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    file_harness(alice, tmp_path, go)
    one_case(alice, "builder", "built", key="build")
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = runner_cli(tmp_path, ["run", "--wait-ms", "2000"], name="laptop")
    try:
        run_id = api.start_run("builder", "builder", f"self:{runner_id}")
        early = wait_events(api, run_id, "build", 3)
        running = api.ok("GET", f"/api/runs/{run_id}/running")["cases"]
        go.touch()
        run = api.wait_run(run_id)
    finally:
        runner.stop()
    assert early["running"] is True
    assert [e["data"]["command"] for e in early["events"]] == ["make 0", "make 1", "make 2"]
    assert early["step"]["label"] == "Bash `make 2`"
    assert [(c["case"], c["step"]["label"]) for c in running] == [("build", "Bash `make 2`")]
    assert run["status"] == "succeeded", run
    done = api.ok("GET", f"/api/runs/{run_id}/trace?key=build")
    assert [e["seq"] for e in done["events"]] == [0, 1, 2, 3, 4]
    assert done["events"][-1]["data"] == {"text": "all built"}
    # t2 was answered; t0 and t1 never were: the newest call left open is the step.
    assert done["running"] is False and done["step"]["label"] == "Bash `make 1`"


def test_a_runner_killed_while_its_trace_waited_sends_every_event_once_after_a_restart(
    workspace: Any, alice: Any, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    file_harness(alice, tmp_path, go)
    one_case(alice, "builder", "built", key="build")
    port = free_port()
    env = server_env(tmp_path)
    api = Api(LiveServer(None, port), api_key_create(user=alice, name="field").key)  # type: ignore[arg-type]
    spool = tmp_path / "laptop.spool"
    with scheduler(tmp_path, **env):
        with daphne(tmp_path, port=port, **env):
            runner_id = api.pair(tmp_path, "laptop", "laptop")
            runner = runner_cli(tmp_path, ["run", "--wait-ms", "2000"], name="laptop")
            run_id = api.start_run("builder", "builder", f"self:{runner_id}")
            wait_events(api, run_id, "build", 3)
        # The server is gone: the rest of the trace and the result can only wait on disk.
        go.touch()
        deadline = time.monotonic() + 40
        while not (list(spool.glob("*.trace.jsonl")) and list(spool.glob("*-*.json"))):
            assert time.monotonic() < deadline, runner.output()
            time.sleep(0.1)
        runner.stop(signal.SIGKILL)
        (kept,) = spool.glob("*.trace.jsonl")
        assert oct(kept.stat().st_mode & 0o777) == "0o600"
        # Past the lease: the scheduler lets it lapse (its attempt expired, the job queued
        # again at the same epoch); the runner's next start takes it back with its result.
        attempts = JobAttempt.objects.filter(job__run_id=run_id)
        deadline = time.monotonic() + LEASE_TTL_S + 30
        while not attempts.filter(status=AttemptStatus.EXPIRED).exists():
            assert time.monotonic() < deadline, list(attempts.values("status"))
            time.sleep(0.1)
        with daphne(tmp_path, port=port, **env):
            again = runner_cli(tmp_path, ["run", "--wait-ms", "2000"], name="laptop")
            try:
                run = api.wait_run(run_id, timeout=60)
                deadline = time.monotonic() + 30
                while list(spool.glob("*.trace.jsonl")):
                    assert time.monotonic() < deadline, again.output()
                    time.sleep(0.1)
                trace = api.ok("GET", f"/api/runs/{run_id}/trace?key=build")
            finally:
                again.stop()
    assert run["status"] == "succeeded", (run, again.output())
    # Resumed, not leased again: the one attempt that lapsed is the one that succeeded.
    assert list(attempts.values_list("status", flat=True)) == [AttemptStatus.SUCCEEDED]
    assert "sending the trace of 1 case(s) kept earlier" in again.output()
    assert [e["seq"] for e in trace["events"]] == [0, 1, 2, 3, 4]
    assert [e["kind"] for e in trace["events"]] == [
        "tool_call",
        "tool_call",
        "tool_call",
        "tool_result",
        "message",
    ]
    assert (trace["kept"], trace["last_seq"], trace["dropped"]) == (5, 4, 0)
