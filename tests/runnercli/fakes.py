"""A small runner session for testing its parts one by one: a real status line, the real
parts, and a fake of the network boundary — a client that records every call and answers
what the test scripts (by default, what a healthy server answers)."""

from __future__ import annotations

import asyncio
import io
from collections import defaultdict
from typing import Any

from runnercli.client import RunnerClient
from runnercli.client.grants import LeaseBatch
from runnercli.commands.loop import RunnerLoop
from runnercli.console.status import StatusLine
from runnercli.options import RunOptions
from runnercli.protocol import (
    Ack,
    CaseJob,
    CaseResult,
    HeartbeatAck,
    Hello,
    Lease,
    ResultReport,
)
from runnercli.session import JobRun, Session

Answer = Any  # a reply model, or an exception to raise


class FakeClient(RunnerClient):
    """Records each runner tool call as `(tool, arguments)`; answers from the script."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9", "rnr_fake")
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.script: dict[str, list[Answer]] = defaultdict(list)
        # Set on each call, for a test waiting for one.
        self.called = asyncio.Event()

    def answer(self, tool: str, *answers: Answer) -> None:
        """Answer the next calls of `tool` with these, in order (then the default)."""
        self.script[tool].extend(answers)

    def of(self, tool: str) -> list[dict[str, Any]]:
        """The arguments of every call of `tool` so far."""
        return [args for name, args in self.calls if name == tool]

    async def _reply(self, tool: str, default: Answer, **args: Any) -> Any:
        self.calls.append((tool, args))
        self.called.set()
        answer = self.script[tool].pop(0) if self.script[tool] else default
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def hello(
        self, *, capabilities: list[str], status: str = "", paused_reason: str | None = None
    ) -> Hello:
        hello = Hello(
            runner_id=1, label="laptop", owner="alice", server_protocol=2, update_required=False
        )
        return await self._reply("hello", hello, capabilities=capabilities, status=status)

    async def lease_job(
        self, *, wait_ms: int, capabilities: list[str], status: str, max_jobs: int | None = None
    ) -> LeaseBatch:
        # With nothing scripted, the long-poll answers "no job" after a short wait.
        if not self.script["lease_job"]:
            await asyncio.sleep(min(wait_ms, 50) / 1000)
        args = {"wait_ms": wait_ms, "max_jobs": max_jobs, "status": status}
        return await self._reply("lease_job", LeaseBatch(), **args)

    async def heartbeat_job(self, *, job_id: int, lease_epoch: int, status: str) -> HeartbeatAck:
        ack = HeartbeatAck(accepted=True)
        return await self._reply(
            "heartbeat_job", ack, job_id=job_id, lease_epoch=lease_epoch, status=status
        )

    async def submit_job_result(self, *, job_id: int, lease_epoch: int, result: CaseResult) -> Ack:
        args = {"job_id": job_id, "lease_epoch": lease_epoch, "result": result}
        return await self._reply("submit_job_result", Ack(accepted=True), **args)

    async def submit_job_results(self, reports: list[ResultReport]) -> list[Ack]:
        acks = [Ack(accepted=True) for _ in reports]
        return await self._reply("submit_job_results", acks, reports=reports)

    async def release_job(
        self, *, job_id: int, lease_epoch: int, reason: str, paused_until: str | None = None
    ) -> Ack:
        args = {"job_id": job_id, "lease_epoch": lease_epoch, "reason": reason}
        return await self._reply("release_job", Ack(accepted=True), **args, until=paused_until)

    async def fail_job(
        self, *, job_id: int, lease_epoch: int, message: str, retryable: bool = False
    ) -> Ack:
        args = {"job_id": job_id, "lease_epoch": lease_epoch, "message": message}
        return await self._reply("fail_job", Ack(accepted=True), **args, retryable=retryable)

    async def report_case_log(self, *, job_id: int, lease_epoch: int, lines: list[str]) -> Ack:
        args = {"job_id": job_id, "lease_epoch": lease_epoch, "lines": lines}
        return await self._reply("report_case_log", Ack(accepted=True), **args)


def fake_session(client: FakeClient | None = None, **options: Any) -> Session:
    """A session over a fake client, its status line written to a string (`said`)."""
    status = StatusLine(stream=io.StringIO(), live=False)
    return Session(client or FakeClient(), RunOptions(capabilities=["python"], **options), status)


def fake_runner(client: FakeClient | None = None, **options: Any) -> RunnerLoop:
    """The runner's parts put together as `run` does, over a fake client."""
    status = StatusLine(stream=io.StringIO(), live=False)
    consent = options.pop("consent", None)
    options = {"capabilities": ["python"], "wait_ms": 1000, **options}
    return RunnerLoop(client or FakeClient(), RunOptions(**options), status, consent=consent)


def said(session: Session) -> str:
    """Everything the session's status line printed."""
    stream = session.status.stream
    assert isinstance(stream, io.StringIO)
    return stream.getvalue()


def fake_client(session: Session) -> FakeClient:
    assert isinstance(session.client, FakeClient)
    return session.client


def held(job: CaseJob, *, epoch: int = 1, heartbeat_ms: int = 60_000) -> JobRun:
    """The job as a runner holds it once leased."""
    lease = Lease(
        job_id=job.job_id,
        lease_epoch=epoch,
        lease_ttl_ms=3 * heartbeat_ms,
        heartbeat_ms=heartbeat_ms,
    )
    return JobRun(job, lease)
