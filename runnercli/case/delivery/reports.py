"""Reports on their way to the server; a finished case's result is never given up.

A result is written to the spool before it is sent and stays there until the server answers
for it: accepted (perhaps `resumed`: its lease had lapsed and was taken back), or refused
for good (another runner took the job; the server keeps it as a late result). Until then it
is sent again with jittered backoff after any transport failure or any tool error whose
structured content says `retryable`; only a final tool error (the server will never store
this result) ends it early, and the caller then says why on the job.

Patience: no deadline. While the server cannot answer, the runner cannot know whether the
lease can still be resumed — only the server's answer settles it, and the spool keeps the
result across a restart — so waiting longer costs one small call per
`DELIVERY_BACKOFF_CAP_S`, while giving up would throw away work the server would still take.
The member's second signal (abort) ends the wait and leaves the result in the spool for the
next start.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from runnercli.case.artifacts.shelf import Shelf
from runnercli.case.artifacts.upload import resend_blobs
from runnercli.case.delivery.batches import ResultSender
from runnercli.case.delivery.spool import Spool, Spooled, SpoolError
from runnercli.client import RevokedError, ServerUnavailable, ToolCallError
from runnercli.client.backoff import Backoff
from runnercli.console.exits import EXIT_REVOKED, REVOKED_MESSAGE, RunnerExit
from runnercli.console.status import shorten
from runnercli.protocol import (
    FAIL_MESSAGE_CHARS,
    MAX_RELEASE_REASON_CHARS,
    Ack,
    ResultReport,
    names_missing_artifact,
)
from runnercli.session import JobRun, Session
from runnercli.tasks import wait_event

# The longest wait between two sends of a result: how late it lands after an outage.
DELIVERY_BACKOFF_CAP_S = 30.0
# How long a failure report or a hand-back is retried while the server cannot be reached
# (nothing is lost without it: the lease then lapses and the job is retried).
REPORT_PATIENCE_S = 600.0
# How often a result refused for a blob the server lacks is sent again after uploading it.
MAX_ARTIFACT_RESENDS = 3


class Delivery:
    """Send reports; keep results in the spool until the server answers for them."""

    def __init__(self, session: Session, spool: Spool | None = None) -> None:
        self.session = session
        self.status = session.status
        self.spool = spool
        # Results that finish together go in one call.
        self.results = ResultSender(session.client)
        # The artifacts results name, until the results are delivered.
        self.shelf = spool.blobs if spool is not None else Shelf()

    async def close(self) -> None:
        """Stop sending results; whoever still awaits an ack is canceled."""
        await self.results.close()

    async def deliver(
        self,
        call: Callable[[], Awaitable[Ack]],
        *,
        title: str = "job",
        patience_s: float = REPORT_PATIENCE_S,
    ) -> bool:
        """Send a report until the server answers; return whether it accepted it.

        A server that cannot be reached, or that says its trouble is passing, is retried until
        `patience_s` passes or the member aborts; a final tool error is raised to the caller.
        """
        deadline = time.monotonic() + patience_s
        while True:
            try:
                ack = await call()
            except RevokedError as exc:
                raise RunnerExit(EXIT_REVOKED, REVOKED_MESSAGE) from exc
            except ServerUnavailable as exc:
                if time.monotonic() > deadline or self.session.abort.is_set():
                    self.status.event(f"{title}: ✗ could not report: {exc}")
                    return False
                await self.session.pause(f"cannot reach server: {exc}", until=self.session.abort)
                continue
            self.session.backoff.reset()
            if not ack.accepted:
                self.status.event(f"{title}: ✗ report refused: {ack.reason or 'no reason given'}")
            self.session.show()
            return ack.accepted

    async def release(
        self,
        job_id: int,
        lease_epoch: int,
        reason: str,
        *,
        title: str,
        paused_until: str | None = None,
        patience_s: float = REPORT_PATIENCE_S,
    ) -> bool:
        """Hand the job back without spending an attempt (`release_job`); with `paused_until`
        the server pauses this runner until then. Return whether it was taken back."""
        try:
            return await self.deliver(
                lambda: self.session.client.release_job(
                    job_id=job_id,
                    lease_epoch=lease_epoch,
                    reason=reason[:MAX_RELEASE_REASON_CHARS],
                    paused_until=paused_until,
                ),
                title=title,
                patience_s=patience_s,
            )
        except ToolCallError as exc:
            self.status.event(f"{title}: ✗ hand-back refused: {exc}")
            return False

    async def fail(self, job_run: JobRun, message: str, *, retryable: bool = False) -> bool:
        """End the job with `fail_job` (its reason shown on the job, redacted); whether it
        was taken."""
        message = self.session.options.redactor.text(message)
        try:
            return await self.deliver(
                lambda: self.session.client.fail_job(
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

    async def deliver_result(
        self, report: ResultReport, title: str, job_run: JobRun | None = None
    ) -> bool:
        """Send a finished case's result until the server answers for it; return whether it
        was accepted. Raise ToolCallError when the server refuses it for good."""
        # Written before it is sent; synced to the disk only once it has to wait.
        await self._spool_put(report, title, durable=False)
        backoff = Backoff(cap_s=DELIVERY_BACKOFF_CAP_S)
        durable = False
        resends = MAX_ARTIFACT_RESENDS
        while True:
            if job_run is not None and job_run.epoch != report.lease_epoch:
                # The job was leased to this runner again while the result waited: it goes
                # with the new fence.
                await self._spool_drop(report)
                report = report.model_copy(update={"lease_epoch": job_run.epoch})
                await self._spool_put(report, title, durable=True)
                durable = True
            try:
                ack = await self.results.submit(report)
            except RevokedError as exc:
                await self._spool_sync(report, title)
                raise RunnerExit(EXIT_REVOKED, REVOKED_MESSAGE) from exc
            except ServerUnavailable as exc:
                if not durable:
                    durable = await self._spool_sync(report, title)
                if self.session.abort.is_set():
                    self._kept(title)
                    return False
                delay = backoff.next_delay()
                self.status.set(
                    f"{title}: result not delivered yet ({shorten(str(exc))}), "
                    f"retrying in {delay:.1f}s"
                )
                await wait_event(self.session.abort, delay)
                continue
            except ToolCallError:
                await self._spool_drop(report)
                raise
            if not ack.accepted and names_missing_artifact(ack.reason) and resends > 0:
                # Uploaded while the server was away, or removed since: sent again, then
                # the result with it.
                resends -= 1
                report = await self._send_missing(report, title)
                continue
            await self._spool_drop(report)
            self._acknowledged(title, ack)
            self.shelf.collect(_blobs_of(report))
            return ack.accepted

    async def _send_missing(self, report: ResultReport, title: str) -> ResultReport:
        """Upload the blobs the result names that the server lacks; the result without those
        no longer at hand or refused, kept in the spool as it now is."""
        sent = await resend_blobs(
            self.session.client,
            self.shelf,
            report,
            abort=self.session.abort,
            say=lambda line: self.status.event(f"{title}: {line}"),
        )
        if sent is not report:
            await self._spool_put(sent, title, durable=True)
        return sent

    def _acknowledged(self, title: str, ack: Ack) -> None:
        if ack.accepted and ack.reason == "resumed":
            self.status.event(f"{title}: result delivered (its lapsed lease was resumed)")
        elif not ack.accepted:
            self.status.event(
                f"{title}: ✗ result refused: {ack.reason or 'no reason given'} "
                "(the server keeps it as a late result)"
            )
        self.session.show()

    def _kept(self, title: str) -> None:
        where = f" in {self.spool.directory}" if self.spool is not None else ""
        self.status.event(f"{title}: result kept{where}; it is sent when the runner starts again")

    async def resend_spooled(self) -> None:
        """Send what an earlier run of this runner left in the spool, before leasing."""
        if self.spool is None:
            return
        # Blobs kept for results that are no longer waiting (a killed runner's) go first.
        await asyncio.to_thread(self.shelf.sweep)
        entries, problems = await asyncio.to_thread(self.spool.pending)
        for problem in problems:
            self.status.event(f"⚠ a spooled result could not be read (left in place): {problem}")
        if not entries:
            return
        self.status.event(
            f"sending {len(entries)} result(s) kept from an earlier run in {self.spool.directory}"
        )
        outcomes = await asyncio.gather(
            *(self._resend(entry) for entry in entries), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):  # a revoked runner: nothing more to send
                raise outcome

    async def _resend(self, entry: Spooled) -> None:
        try:
            if await self.deliver_result(entry.report, entry.title):
                self.status.event(f"{entry.title}: ✓ result from an earlier run delivered")
        except ToolCallError as exc:
            self.status.event(f"{entry.title}: ✗ result from an earlier run refused: {exc}")

    async def _spool_put(self, report: ResultReport, title: str, *, durable: bool) -> None:
        if self.spool is None:
            return
        try:
            await asyncio.to_thread(self.spool.put, report, title, durable=durable)
        except SpoolError as exc:
            # Still sent: only a crash before the server answers would lose it now.
            self.status.event(f"⚠ {title}: the result could not be kept on disk: {exc}")

    async def _spool_sync(self, report: ResultReport, title: str) -> bool:
        """Sync a waiting result to the disk; whether it is (or needs no more) syncing."""
        if self.spool is None:
            return True
        try:
            await asyncio.to_thread(self.spool.make_durable, report)
        except SpoolError as exc:
            self.status.event(f"⚠ {title}: the result could not be synced to disk: {exc}")
            return False
        return True

    async def _spool_drop(self, report: ResultReport) -> None:
        # An unlink, not synced: cheaper in place than handed to a thread. Should a crash
        # undo it, the result is sent again and the server answers it as a duplicate.
        if self.spool is not None:
            self.spool.drop(report)


def _blobs_of(report: ResultReport) -> list[str]:
    return [ref.sha256 for ref in report.result.artifacts or []]
