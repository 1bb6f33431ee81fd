"""One leased job: run its case with a heartbeat and a log, then report how it ended.

`JobHandling` is the half of `RunnerLoop` that deals with a single job. The other half (in
`runnercli.loop`) owns the session, the status line and the stop state; what this half
relies on of it is declared below.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from runnercli.backoff import Backoff
from runnercli.caselog import CaseLog
from runnercli.client import RevokedError, RunnerClient, ServerUnavailable, ToolCallError
from runnercli.consent import Consent, Decision, Outcome
from runnercli.executor import StartError, run_case
from runnercli.exits import EXIT_REVOKED, REVOKED_MESSAGE, RunnerExit
from runnercli.protocol import FAIL_MESSAGE_CHARS, Ack, CaseJob, CaseResult, Lease, ResultReport
from runnercli.results import ResultSender
from runnercli.status import StatusLine, shorten
from runnercli.tools import ToolVersions, with_tools

if TYPE_CHECKING:
    from runnercli.loop import RunOptions

# How long a result is retried while the server is unreachable before it is given up.
DELIVERY_PATIENCE_S = 600.0


@dataclass
class JobRun:
    job: CaseJob
    lease: Lease
    kill: asyncio.Event = field(default_factory=asyncio.Event)
    # Set when the server took the job back (canceled, lease lost): nothing more is reported.
    lost_reason: str | None = None
    canceled: bool = False
    # Set on the second signal: the case is killed and handed back for another attempt.
    abandoned: bool = False

    @property
    def title(self) -> str:
        job = self.job
        return f"run {job.run_id} case {job.case.key}"


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.1f}s"


class JobHandling(ABC):
    """Run one leased job and report it: the per-job half of `RunnerLoop`."""

    # Set up by RunnerLoop.
    client: RunnerClient
    options: RunOptions
    status: StatusLine
    backoff: Backoff
    results: ResultSender
    running: dict[int, JobRun]
    last_failure: str | None
    consent: Consent
    tools: ToolVersions
    _stop: asyncio.Event
    _abort: asyncio.Event

    @abstractmethod
    def status_text(self) -> str:
        """Return the short status sent with each heartbeat."""

    @abstractmethod
    def _show(self) -> None:
        """Show the current status on the status line."""

    @abstractmethod
    def _die(self, exc: RunnerExit) -> None:
        """Stop the whole runner with `exc`."""

    @abstractmethod
    async def _pause(self, why: str, *, until: asyncio.Event | None = None) -> None:
        """Wait a backoff delay, cut short by `until`, saying why."""

    async def _handle(self, job_run: JobRun) -> bool:
        """Run one leased job and report it; return whether the server took the report."""
        job = job_run.job
        self.running[job.job_id] = job_run
        self._show()
        log = CaseLog(self.client, job.job_id, job_run.lease.lease_epoch)
        heartbeat = asyncio.create_task(self._heartbeat(job_run))
        try:
            # The member decides what runs here; the lease heartbeats while they are asked.
            decision = await self.consent.decide(job, kill=job_run.kill, stop=self._stop)
            if decision.outcome is not Outcome.RUN:
                return await self._not_run(job_run, log, decision)
            tools = await self.tools.of(job)
            log.start()
            started = f"▶ started {job.harness.name} v{job.harness.version} case {job.case.key}"
            log.add(started)
            self.status.event(f"{job_run.title}: {started}")
            try:
                result = await run_case(
                    job, on_stderr_line=log.add, on_note=log.add, kill=job_run.kill
                )
            except StartError as exc:
                return await self._report_start_error(job_run, log, str(exc))
            # The case is over: no heartbeat may cross the result on its way.
            heartbeat.cancel()
            return await self._report(job_run, log, with_tools(result, tools))
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            await log.close(flush=False)
            self.running.pop(job.job_id, None)
            self._show()

    async def _not_run(self, job_run: JobRun, log: CaseLog, decision: Decision) -> bool:
        if decision.outcome is Outcome.REFUSE:
            return await self._refuse(job_run, log, decision.message)
        if decision.outcome is Outcome.HAND_BACK or job_run.abandoned:
            self.status.result(f"{job_run.title}: ■ handed back")
            return await self._fail(job_run, "the runner was stopped by its owner", retryable=True)
        self.status.result(f"{job_run.title}: ■ stopped: {job_run.lost_reason or decision.message}")
        return job_run.canceled

    async def _refuse(self, job_run: JobRun, log: CaseLog, message: str) -> bool:
        job = job_run.job
        log.add(f"✗ refused: {message}")
        await log.flush()
        self.status.result(f"{job_run.title}: ✗ refused: {message}")
        self.last_failure = shorten(f"refused {job.harness.name}")
        return await self._fail(job_run, message, retryable=False)

    async def _report_start_error(self, job_run: JobRun, log: CaseLog, message: str) -> bool:
        log.add(f"✗ failed: {message}")
        await log.close()
        self.status.result(f"{job_run.title}: ✗ failed: {message}")
        self.last_failure = shorten(message)
        return await self._fail(job_run, message, retryable=False)

    async def _report(self, job_run: JobRun, log: CaseLog, result: CaseResult) -> bool:
        if job_run.lost_reason is not None:
            await log.close(flush=False)
            self.status.result(f"{job_run.title}: ■ stopped: {job_run.lost_reason}")
            # A canceled job needs no report; a lost lease means this result counts nowhere.
            return job_run.canceled
        if job_run.abandoned:
            await log.close(flush=False)
            self.status.result(f"{job_run.title}: ■ handed back")
            return await self._fail(job_run, "the runner was stopped by its owner", retryable=True)
        line = self._outcome_line(job_run, result)
        log.add(line)
        await log.close()
        self.status.result(f"{job_run.title}: {line}")
        report = ResultReport(
            job_id=job_run.job.job_id, lease_epoch=job_run.lease.lease_epoch, result=result
        )
        try:
            return await self._deliver(lambda: self.results.submit(report), title=job_run.title)
        except ToolCallError as exc:
            # The server will not store this result (invalid, oversized): say why on the job
            # rather than leave it leased until its lease expires.
            self.status.event(f"{job_run.title}: ✗ result refused: {exc}")
            return await self._fail(
                job_run, f"the server refused the result: {exc}", retryable=False
            )

    def _outcome_line(self, job_run: JobRun, result: CaseResult) -> str:
        took = _seconds(result.duration_ms)
        if result.status == "completed":
            self.last_failure = None if result.exit_code == 0 else f"exit {result.exit_code}"
            return f"✓ completed exit {result.exit_code} in {took}"
        reason = (
            f"timed out after {job_run.job.timeout_s}s"
            if result.status == "timeout"
            else result.status
        )
        self.last_failure = shorten(reason)
        return f"✗ failed: {reason}"

    async def _fail(self, job_run: JobRun, message: str, *, retryable: bool) -> bool:
        try:
            return await self._deliver(
                lambda: self.client.fail_job(
                    job_id=job_run.job.job_id,
                    lease_epoch=job_run.lease.lease_epoch,
                    message=message[:FAIL_MESSAGE_CHARS],
                    retryable=retryable,
                ),
                title=job_run.title,
            )
        except ToolCallError as exc:
            self.status.event(f"{job_run.title}: ✗ failure report refused: {exc}")
            return False

    async def _deliver(
        self,
        call: Callable[[], Awaitable[Ack]],
        *,
        title: str = "job",
        patience_s: float = DELIVERY_PATIENCE_S,
    ) -> bool:
        """Send a report until the server answers; return whether it accepted it.

        A server that cannot be reached is retried (a restart should not lose a result) until
        `patience_s` passes or the member aborts; a tool error is raised to the caller.
        """
        deadline = time.monotonic() + patience_s
        while True:
            try:
                ack = await call()
            except RevokedError as exc:
                raise RunnerExit(EXIT_REVOKED, REVOKED_MESSAGE) from exc
            except ServerUnavailable as exc:
                if time.monotonic() > deadline or self._abort.is_set():
                    self.status.event(f"{title}: ✗ could not report: {exc}")
                    return False
                await self._pause(f"cannot reach server: {exc}", until=self._abort)
                continue
            self.backoff.reset()
            if not ack.accepted:
                self.status.event(f"{title}: ✗ report refused: {ack.reason or 'no reason given'}")
            self._show()
            return ack.accepted

    async def _heartbeat(self, job_run: JobRun) -> None:
        interval = max(0.1, job_run.lease.heartbeat_ms / 1000)
        job = job_run.job
        while True:
            await asyncio.sleep(interval)
            try:
                ack = await self.client.heartbeat_job(
                    job_id=job.job_id,
                    lease_epoch=job_run.lease.lease_epoch,
                    status=self.status_text(),
                )
            except RevokedError:
                self._die(RunnerExit(EXIT_REVOKED, REVOKED_MESSAGE))
                return
            except (ServerUnavailable, ToolCallError):
                continue  # the case keeps running; the lease outlives a few missed beats
            if ack.cancel or not ack.accepted:
                # The server took the job back: end the case now and report nothing more.
                job_run.canceled = ack.cancel
                job_run.lost_reason = ack.reason or ("canceled" if ack.cancel else "lease lost")
                job_run.kill.set()
                return
