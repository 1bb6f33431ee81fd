"""A server that lies, for the runner to meet: a tiny MCP endpoint on the wire.

The official MCP SDK's server under uvicorn, in a thread of the test, with the runner tools
a real server has. It hands out the jobs a test scripts — raw JSON, as any server could send
them, digests and environments included — and records what the runner answers: failures,
results, log lines and status lines. A double of the wire, not of our code.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer

from runnercli.protocol import (
    PROTOCOL_VERSION,
    RUNNER_CONTEXT,
    HarnessSpec,
    Limits,
    harness_digest,
)
from tests.live import free_port

TOKEN = "rnr_a_token_the_fake_server_never_checks"


def wire_job(
    job_id: int,
    command: list[str],
    *,
    env: dict[str, str] | None = None,
    workspace: str = "acme",
    name: str = "writer",
    version: int = 1,
    digest: str | None = None,
    key: str = "c1",
) -> dict[str, Any]:
    """A case job as a server sends it; `digest` defaults to the honest one."""
    spec = {"command": command, "env": env or {}, "timeout_s": 30, "capabilities": []}
    honest = harness_digest(HarnessSpec.model_validate(spec, context=RUNNER_CONTEXT))
    return {
        "job_id": job_id,
        "attempt_id": job_id,
        "lease_epoch": 1,
        "run_id": 1,
        "workspace": workspace,
        "submitted_by": "mallory",
        "repeat": 0,
        "case": {"key": key, "input": {}},
        "harness": {
            "name": name,
            "version": version,
            "digest": digest or honest,
            "author": "mallory",
            "spec": spec,
        },
        "capabilities": [],
        "timeout_s": 30,
    }


def writer(marker: Any) -> list[str]:
    """A harness that writes `marker` when (and only if) it runs."""
    return [sys.executable, "-c", "import sys; open(sys.argv[1], 'w').write('ran')", str(marker)]


@dataclass
class FakeServer:
    url: str = ""
    jobs: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    # The long-poll window offered in hello (None: no `limits`, the runner's defaults), and
    # the `wait_ms` of every lease call.
    max_wait_ms: int | None = None
    waits: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, *jobs: dict[str, Any]) -> None:
        with self.lock:
            self.jobs.extend(jobs)

    def answered(self) -> set[int]:
        with self.lock:
            return {int(r["job_id"]) for r in self.failures + self.results}

    def wait(self, done: Callable[[], bool], timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done():
                return
            time.sleep(0.05)
        raise AssertionError(f"the runner did not answer in time: {self.failures} {self.results}")

    def failure(self, job_id: int) -> dict[str, Any]:
        return next(f for f in self.failures if f["job_id"] == job_id)

    def mcp(self) -> MCPServer:
        server: MCPServer = MCPServer("a-server-that-lies")
        for tool in (
            self.hello,
            self.lease_job,
            self.heartbeat_job,
            self.fail_job,
            self.submit_job_result,
            self.submit_job_results,
            self.report_case_log,
        ):
            server.add_tool(tool)
        return server

    async def hello(
        self, protocol: int, capabilities: list[str] | None = None, status: str = ""
    ) -> dict[str, Any]:
        reply: dict[str, Any] = {
            "runner_id": 1,
            "label": "fake",
            "owner": "alice",
            "server_protocol": PROTOCOL_VERSION,
            "update_required": False,
        }
        if self.max_wait_ms is not None:
            reply["limits"] = Limits(max_wait_ms=self.max_wait_ms).model_dump()
        return reply

    async def lease_job(
        self,
        protocol: int,
        wait_ms: int = 0,
        capabilities: list[str] | None = None,
        status: str = "",
        max_jobs: int | None = None,
    ) -> dict[str, Any]:
        with self.lock:
            self.statuses.append(status)
            self.waits.append(wait_ms)
            job = self.jobs.pop(0) if self.jobs else None
        if job is None:
            await asyncio.sleep(min(wait_ms, 300) / 1000)
            return {"job": None, "lease": None, "update_required": False}
        lease = {"job_id": job["job_id"], "lease_epoch": 1, "lease_ttl_ms": 30_000}
        return {"job": job, "lease": {**lease, "heartbeat_ms": 500}, "update_required": False}

    async def heartbeat_job(
        self, job_id: int, lease_epoch: int, status: str = ""
    ) -> dict[str, Any]:
        with self.lock:
            self.statuses.append(status)
        return {"accepted": True, "cancel": False, "reason": "", "resumed": False}

    async def fail_job(
        self, job_id: int, lease_epoch: int, message: str, retryable: bool = False
    ) -> dict[str, Any]:
        with self.lock:
            self.failures.append({"job_id": job_id, "message": message, "retryable": retryable})
        return {"accepted": True, "reason": ""}

    async def submit_job_result(
        self, job_id: int, lease_epoch: int, result: dict[str, Any]
    ) -> dict[str, Any]:
        with self.lock:
            self.results.append({"job_id": job_id, "result": result})
        return {"accepted": True, "reason": ""}

    async def submit_job_results(self, results: list[dict[str, Any]]) -> dict[str, Any]:
        with self.lock:
            self.results.extend(results)
        return {"acks": [{"accepted": True, "reason": ""} for _ in results]}

    async def report_case_log(self, job_id: int, lease_epoch: int, lines: list[str]) -> dict:
        return {"accepted": True, "reason": ""}


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Serve an ASGI app (an MCP SDK server's) under uvicorn in a thread; yield its URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, name="fake-mcp", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the fake server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def fake_server(**options: Any) -> Iterator[FakeServer]:
    fake = FakeServer(**options)
    app = fake.mcp().streamable_http_app(stateless_http=True, json_response=True)
    with serve(app) as url:
        fake.url = url
        yield fake
