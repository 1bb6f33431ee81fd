"""One leased job: run its case with a heartbeat and a log, then report how it ended.

`JobHandling` is the part of `RunnerLoop` that deals with a single job; heartbeats, result
delivery and plan-limit pauses are parts of their own (`runnercli.sleep`,
`runnercli.delivery`, `runnercli.ratelimit`). The loop (in `runnercli.loop`) owns the
session, the status line and the stop state (`runnercli.parts` declares what is shared).
"""

from __future__ import annotations

import asyncio
import contextlib

from runnercli.caselog import CaseLog
from runnercli.client import ToolCallError
from runnercli.consent import Decision, Outcome
from runnercli.delivery import Delivery
from runnercli.executor import StartError, run_case
from runnercli.parts import JobRun
from runnercli.protocol import FAIL_MESSAGE_CHARS, CaseResult, ResultReport
from runnercli.ratelimit import Pausing, rate_limited
from runnercli.sleep import Wakefulness
from runnercli.status import shorten
from runnercli.tools import with_tools


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.1f}s"


class JobHandling(Delivery, Wakefulness, Pausing):
    """Run one leased job and report it: the per-job part of `RunnerLoop`."""

    async def _handle(self, job_run: JobRun) -> bool:
        """Run one leased job and report it; return whether the server took the report."""
        job = job_run.job
        self.running[job.job_id] = job_run
        self._show()
        log = job_run.log = CaseLog(self.client, job.job_id, job_run.epoch)
        log.on_resumed = lambda: self._resumed_elsewhere(job_run)
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
            # The case is over; its lease is heartbeaten until the server answers its report,
            # and its slot takes the next case meanwhile.
            job_run.finished = True
            self._free_slot(job_run)
            return await self._report(job_run, log, with_tools(result, tools))
        finally:
            self._free_slot(job_run)
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
            # Not the case's fault: back to the queue without spending an attempt.
            return await self._release(
                job_run.job.job_id,
                job_run.epoch,
                "the runner was stopped by its owner",
                title=job_run.title,
            )
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
        stopped = result.status == "canceled"
        if job_run.lost_reason is not None and stopped:
            await log.close(flush=False)
            self.status.result(f"{job_run.title}: ■ stopped: {job_run.lost_reason}")
            # A canceled job needs no report; a lost lease means this result counts nowhere.
            return job_run.canceled
        if job_run.abandoned and stopped:
            await log.close(flush=False)
            self.status.result(f"{job_run.title}: ■ handed back")
            # Not the case's fault: back to the queue without spending an attempt.
            return await self._release(
                job_run.job.job_id,
                job_run.epoch,
                "the runner was stopped by its owner",
                title=job_run.title,
            )
        if (limit := rate_limited(job_run.job.harness.spec.retry_on, result)) is not None:
            return await self._release_rate_limited(job_run, limit)
        line = self._outcome_line(job_run, result)
        log.add(line)
        self.status.result(f"{job_run.title}: {line}")
        # The lines not sent yet (the start and outcome of a short case) ride with the result.
        result = result.model_copy(update={"log_tail": await log.close_into_tail()})
        report = ResultReport(job_id=job_run.job.job_id, lease_epoch=job_run.epoch, result=result)
        try:
            return await self._deliver_result(report, job_run.title, job_run)
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
                    lease_epoch=job_run.epoch,
                    message=message[:FAIL_MESSAGE_CHARS],
                    retryable=retryable,
                ),
                title=job_run.title,
            )
        except ToolCallError as exc:
            self.status.event(f"{job_run.title}: ✗ failure report refused: {exc}")
            return False
