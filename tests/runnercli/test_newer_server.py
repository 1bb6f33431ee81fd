"""A server of a later release sends a job this runner cannot read, beside one it can.

The runner CLI runs as a process against a small MCP server playing that later release:
its `lease_job` grants two jobs in one batch, one with a spec key this runner does not know.
The readable one runs and is reported; the other is failed on its own, finally, naming why.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer

from runnercli.protocol import Ack, BatchAck, CaseResult, HeartbeatAck, Hello, ResultReport
from tests.live import free_port, runner_cli
from tests.runnercli.conftest import make_job

pytestmark = pytest.mark.e2e


def grant(job_id: int, **spec: Any) -> dict[str, Any]:
    job = make_job([sys.executable, "-c", "print('ok')"]).model_dump(mode="json")
    job.update(job_id=job_id, attempt_id=job_id)
    job["harness"]["spec"].update(spec)
    lease = {"job_id": job_id, "lease_epoch": 1, "lease_ttl_ms": 60_000, "heartbeat_ms": 20_000}
    return {"job": job, "lease": lease}


class LaterServer:
    """What the later release was asked, and its answers."""

    def __init__(self) -> None:
        self.leases = 0
        self.failed: list[tuple[int, str, bool]] = []
        self.results: dict[int, CaseResult] = {}

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
            if self.leases == 1:
                readable, unknown = grant(1), grant(2, sandbox="strict")
                return {**readable, "update_required": False, "jobs": [readable, unknown]}
            await asyncio.sleep(min(wait_ms, 200) / 1000)
            return {"job": None, "lease": None, "update_required": False, "jobs": []}

        async def heartbeat_job(job_id: int, lease_epoch: int, status: str = "") -> HeartbeatAck:
            return HeartbeatAck(accepted=True)

        async def submit_job_results(results: list[ResultReport]) -> BatchAck:
            for report in results:
                self.results[report.job_id] = report.result
            return BatchAck(acks=[Ack(accepted=True) for _ in results])

        async def submit_job_result(job_id: int, lease_epoch: int, result: CaseResult) -> Ack:
            self.results[job_id] = result
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


@contextmanager
def serving(later: LaterServer) -> Iterator[str]:
    port = free_port()
    http = uvicorn.Server(
        uvicorn.Config(later.app(), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=http.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not http.started:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        http.should_exit = True
        thread.join(10)


def test_a_job_the_runner_cannot_read_is_failed_on_its_own_and_the_others_run(
    tmp_path: Path,
) -> None:
    later = LaterServer()
    with serving(later) as url:
        runner = runner_cli(
            tmp_path,
            [
                "run",
                "--server",
                url,
                "--token",
                "rnr_test",
                "--max-concurrent",
                "2",
                "--wait-ms",
                "500",
            ],
        )
        try:
            deadline = time.monotonic() + 30
            while not (later.failed and later.results):
                assert time.monotonic() < deadline, runner.output()
                assert runner.popen.poll() is None, runner.output()
                time.sleep(0.1)
        finally:
            runner.stop(signal.SIGTERM)
    assert list(later.results) == [1]
    assert later.results[1].output == "ok\n"
    ((job_id, message, retryable),) = later.failed
    assert (job_id, retryable) == (2, False)
    assert message.startswith("this runner cannot read the job: job.harness.spec.sandbox:")
    assert "job 2: ✗ this runner cannot read the job" in runner.output()
