"""The runner CLI against a scripted MCP server: answers a real server gives only in a later
release or in a race.

- A later release grants two jobs in one batch, one with a spec key this runner does not
  know: the readable one runs and is reported; the other is failed on its own, naming why.
- A lease call in flight while the runner slept brings back the very job whose case still
  runs here, under a new fence: the case is not started twice, and its result goes with the
  new fence.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from runnercli.protocol import Ack, BatchAck, CaseResult, HeartbeatAck, Hello, ResultReport
from tests.live import Proc, runner_cli
from tests.runnercli.conftest import make_job
from tests.runnercli.fake_server import serve

pytestmark = pytest.mark.e2e


def grant(job_id: int, epoch: int = 1, command: list[str] | None = None, **spec: Any) -> Any:
    command = command or [sys.executable, "-c", "print('ok')"]
    job = make_job(command).model_dump(mode="json")
    job.update(job_id=job_id, attempt_id=job_id, lease_epoch=epoch)
    job["harness"]["spec"].update(spec)
    lease = {"job_id": job_id, "lease_epoch": epoch, "lease_ttl_ms": 60_000, "heartbeat_ms": 300}
    return {"job": job, "lease": lease}


class ScriptedServer:
    """Grants the batches it is given, one per `lease_job`, and records what it was told."""

    def __init__(self, batches: list[list[dict[str, Any]]]) -> None:
        self.batches = batches
        self.leases = 0
        self.failed: list[tuple[int, str, bool]] = []
        self.results: dict[int, tuple[int, CaseResult]] = {}
        self.heartbeats: list[tuple[int, int]] = []

    def app(self) -> Any:
        server: MCPServer = MCPServer("everdict")

        async def hello(protocol: int, capabilities: list[str], status: str = "") -> Hello:
            return Hello(
                runner_id=1, label="laptop", owner="alice", server_protocol=2, update_required=False
            )

        async def lease_job(
            protocol: int,
            wait_ms: int = 0,
            capabilities: list[str] | None = None,
            status: str = "",
            max_jobs: int | None = None,
        ) -> dict[str, Any]:
            self.leases += 1
            if self.batches:
                batch = self.batches.pop(0)
                first = batch[0] if batch else {"job": None, "lease": None}
                return {**first, "update_required": False, "jobs": batch}
            await asyncio.sleep(min(wait_ms, 200) / 1000)
            return {"job": None, "lease": None, "update_required": False, "jobs": []}

        async def heartbeat_job(job_id: int, lease_epoch: int, status: str = "") -> HeartbeatAck:
            self.heartbeats.append((job_id, lease_epoch))
            return HeartbeatAck(accepted=True)

        async def submit_job_results(results: list[ResultReport]) -> BatchAck:
            for report in results:
                self.results[report.job_id] = (report.lease_epoch, report.result)
            return BatchAck(acks=[Ack(accepted=True) for _ in results])

        async def submit_job_result(job_id: int, lease_epoch: int, result: CaseResult) -> Ack:
            self.results[job_id] = (lease_epoch, result)
            return Ack(accepted=True)

        async def fail_job(
            job_id: int, lease_epoch: int, message: str, retryable: bool = False
        ) -> Ack:
            self.failed.append((job_id, message, retryable))
            return Ack(accepted=True)

        async def report_case_log(job_id: int, lease_epoch: int, lines: list[str]) -> Ack:
            return Ack(accepted=True)

        for tool in (
            hello,
            lease_job,
            heartbeat_job,
            submit_job_results,
            submit_job_result,
            fail_job,
            report_case_log,
        ):
            server.add_tool(tool)
        return server.streamable_http_app(stateless_http=True)


def run_until(tmp_path: Path, later: ScriptedServer, done: Callable[[], bool]) -> Proc:
    """Run the runner CLI (two slots) against the scripted server until `done()`."""
    with serve(later.app()) as url:
        args = ["--server", url, "--token", "rnr_test", "--max-concurrent", "2"]
        runner = runner_cli(tmp_path, ["run", *args, "--wait-ms", "500"])
        try:
            deadline = time.monotonic() + 30
            while not done():
                assert time.monotonic() < deadline, runner.output()
                assert runner.popen.poll() is None, runner.output()
                time.sleep(0.1)
        finally:
            runner.stop(signal.SIGTERM)
    return runner


def test_a_job_the_runner_cannot_read_is_failed_on_its_own_and_the_others_run(
    tmp_path: Path,
) -> None:
    later = ScriptedServer([[grant(1), grant(2, sandbox="strict")]])
    runner = run_until(tmp_path, later, lambda: bool(later.failed and later.results))
    assert list(later.results) == [1]
    assert later.results[1][1].output == "ok\n"
    # The case's outcome line rode with its result, not in a log call of its own.
    assert later.results[1][1].log_tail[-1].startswith("✓ completed exit 0 in ")
    ((job_id, message, retryable),) = later.failed
    assert (job_id, retryable) == (2, False)
    assert message.startswith("this runner cannot read the job: job.harness.spec.sandbox:")
    assert "job 2: ✗ this runner cannot read the job" in runner.output()


def test_a_job_granted_again_while_its_case_runs_here_goes_on_under_the_new_lease(
    tmp_path: Path,
) -> None:
    go, count = tmp_path / "go", tmp_path / "count"
    waits = [
        sys.executable,
        "-c",
        "import os, sys, time\n"
        "open(sys.argv[1], 'a').write('x')\n"
        "while not os.path.exists(sys.argv[2]): time.sleep(0.05)\n"
        "print('ok')",
        str(count),
        str(go),
    ]
    # The second grant is the same job under epoch 2: it had lapsed while this runner slept
    # and the lease call in flight took it again.
    later = ScriptedServer([[grant(1, command=waits)], [grant(1, epoch=2, command=waits)]])

    def regranted_then_finished() -> bool:
        if later.leases >= 2 and not go.exists():
            time.sleep(0.5)
            go.touch()
        return bool(later.results)

    runner = run_until(tmp_path, later, regranted_then_finished)
    assert count.read_text() == "x"  # started once
    epoch, result = later.results[1]
    assert (epoch, result.output) == (2, "ok\n")
    assert (1, 2) in later.heartbeats  # its heartbeats carried the new fence too
    assert "leased to this runner again while its case still runs here" in runner.output()
