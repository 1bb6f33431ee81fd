"""The `Deliver` stage: answer for the lease, whatever happened to the case.

It is the first stage of the runner's pipeline, so its cleanup is the last: once every other
stage has cleaned up, it sends the result (`submit_job_result`), or the reason the case could
not run (`fail_job`), or hands the case back without spending an attempt (`release_job`: the
runner is stopping, or the harness's tool said it is rate limited and the runner pauses) —
or says nothing, when the server took the job back. The case's outcome line closes its log;
the lines not sent yet ride with the result.
"""

from __future__ import annotations

from collections.abc import Callable

from runnercli.case.delivery.ratelimit import Pauses, rate_limited
from runnercli.case.delivery.reports import Delivery
from runnercli.case.log import CaseLog
from runnercli.case.pipeline import CaseContext, Ending, Failed, HandedBack, Stage, Stopped
from runnercli.client import ToolCallError
from runnercli.console.status import shorten
from runnercli.protocol import CaseResult, ResultReport
from runnercli.session import JobRun, Session


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.1f}s"


class Deliver(Stage):
    """Report how the case ended (`case.ending`, else `case.result`) in its cleanup."""

    name = "deliver"

    def __init__(
        self,
        session: Session,
        delivery: Delivery,
        pauses: Pauses,
        *,
        log: CaseLog,
        on_over: Callable[[], None] = lambda: None,
    ) -> None:
        self.session = session
        self.delivery = delivery
        self.pauses = pauses
        self.log = log
        # Told first: the case is over, its slot may take the next case while this reports.
        self.on_over = on_over

    async def cleanup(self, case: CaseContext) -> None:
        self.on_over()
        try:
            if case.cancelled:
                return  # the runner is going: the lease lapses, or the spool keeps the result
            if case.ending is not None:
                case.reported = await self._end(case.job_run, case.ending)
            elif case.result is not None:
                case.reported = await self._report(case.job_run, case.result)
        finally:
            # The report is over: the artifacts kept for it go, unless the spool still
            # holds a result naming them.
            self.delivery.shelf.release(case.job.job_id)

    async def _end(self, job_run: JobRun, ending: Ending) -> bool:
        title, status = job_run.title, self.session.status
        if isinstance(ending, Failed):
            line = f"✗ {ending.verb}: {ending.reason}"
            self.log.add(line)
            await self.log.close()
            status.result(f"{title}: {line}")
            self.session.last_failure = shorten(ending.summary or ending.reason)
            return await self.delivery.fail(job_run, ending.reason)
        await self.log.close(flush=False)
        if isinstance(ending, HandedBack):
            status.result(f"{title}: ■ handed back")
            # Not the case's fault: back to the queue without spending an attempt.
            return await self.delivery.release(
                job_run.job.job_id, job_run.epoch, ending.reason, title=title
            )
        status.result(f"{title}: ■ stopped: {ending.reason}")
        # A canceled job needs no report; a lost lease means this result counts nowhere.
        return job_run.canceled

    async def _report(self, job_run: JobRun, result: CaseResult) -> bool:
        if result.status == "canceled":
            if job_run.lost_reason is not None:
                return await self._end(job_run, Stopped(job_run.lost_reason))
            if job_run.abandoned:
                return await self._end(job_run, HandedBack())
        if (limit := rate_limited(job_run.job.harness.spec.retry_on, result)) is not None:
            return await self.pauses.release_rate_limited(job_run, limit, log=self.log)
        line = self._outcome_line(job_run, result)
        self.log.add(line)
        self.session.status.result(f"{job_run.title}: {line}")
        # The lines not sent yet (the start and outcome of a short case) ride with the result.
        result = result.model_copy(update={"log_tail": await self.log.close_into_tail()})
        report = ResultReport(job_id=job_run.job.job_id, lease_epoch=job_run.epoch, result=result)
        try:
            return await self.delivery.deliver_result(report, job_run.title, job_run)
        except ToolCallError as exc:
            # The server will not store this result (invalid, oversized): say why on the job
            # rather than leave it leased until its lease expires.
            self.session.status.event(f"{job_run.title}: ✗ result refused: {exc}")
            return await self.delivery.fail(job_run, f"the server refused the result: {exc}")

    def _outcome_line(self, job_run: JobRun, result: CaseResult) -> str:
        took = _seconds(result.duration_ms)
        if result.status == "completed":
            failed = None if result.exit_code == 0 else f"exit {result.exit_code}"
            self.session.last_failure = failed
            return f"✓ completed exit {result.exit_code} in {took}"
        reason = (
            f"timed out after {job_run.job.timeout_s}s"
            if result.status == "timeout"
            else result.status
        )
        self.session.last_failure = shorten(reason)
        return f"✗ failed: {reason}"
