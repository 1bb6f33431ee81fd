"""The leaser: long-poll `lease_job` for as many jobs as there are free slots (and, beside
short cases, as many again ahead of them: `runnercli.slots`), each job in a task of its own,
until the runner stops.

After a sleep, what the runner holds is heartbeaten before it leases more; under a plan
limit it leases nothing until the wait is over; a grant of a job whose case still runs here
(it lapsed while the runner slept) goes on under the new lease; a grant this runner cannot
read is failed on its own.
"""

from __future__ import annotations

import asyncio
import contextlib

from runnercli.case.delivery.ratelimit import Pauses
from runnercli.case.delivery.reports import Delivery
from runnercli.case.heartbeats import Heartbeats
from runnercli.case.jobs import Jobs
from runnercli.client import RevokedError, ServerUnavailable, ToolCallError
from runnercli.client.grants import LeaseBatch, Unparsed
from runnercli.console.exits import (
    EXIT_NOT_REPORTED,
    EXIT_REVOKED,
    EXIT_UPDATE_REQUIRED,
    REVOKED_MESSAGE,
    RunnerExit,
)
from runnercli.console.status import shorten
from runnercli.laptop.part import Laptop
from runnercli.laptop.updates import upgrade_message
from runnercli.protocol import FAIL_MESSAGE_CHARS, PROTOCOL_VERSION, CaseJob, Lease
from runnercli.session import JobRun, Session
from runnercli.slots import Slots
from runnercli.tasks import cancel_and_wait


class Leaser:
    """Lease jobs for the free slots and start each; return when the runner stops."""

    def __init__(
        self,
        session: Session,
        *,
        slots: Slots,
        jobs: Jobs,
        heartbeats: Heartbeats,
        pauses: Pauses,
        delivery: Delivery,
        laptop: Laptop | None = None,
    ) -> None:
        self.laptop = laptop
        self.session = session
        self.slots = slots
        self.jobs = jobs
        self.heartbeats = heartbeats
        self.pauses = pauses
        self.delivery = delivery

    async def run(self) -> None:
        session, once = self.session, self.session.options.once
        busy: set[asyncio.Task[None]] = set()
        try:
            while not session.stop.is_set() and session.fatal is None:
                busy = {task for task in busy if not task.done()}
                # A slot is free once its case is over, while its result is still on its way.
                if self.slots.leasable <= 0:
                    await self.slots.wait_for_one(session.stop)
                    continue
                # After a sleep, what this runner holds is heartbeaten before it leases more;
                # under a plan limit, it leases nothing until the wait is over.
                await self.heartbeats.awake.wait()
                await self.pauses.wait_while_paused()
                # On battery (under `--on-battery pause`) it finishes what it holds only.
                if self.laptop is not None:
                    await self.laptop.wait_for_power()
                if session.stop.is_set():
                    break
                free = await self.slots.gather(wait=not once)
                try:
                    batch = await self._lease(max_jobs=free)
                except RunnerExit as exc:
                    session.die(exc)
                    return
                busy |= await self.take(batch)
                if once and busy:
                    break
            # Jobs leased ahead that wait for room are handed back now, not after a case.
            self.slots.wake()
            await asyncio.gather(*busy, return_exceptions=True)
        finally:
            for task in busy:
                task.cancel()
            await asyncio.gather(*busy, return_exceptions=True)

    async def take(self, batch: LeaseBatch) -> set[asyncio.Task[None]]:
        """A task for each grant of the batch (and for each grant it cannot read)."""
        started = {asyncio.create_task(self._refuse_unparsed(bad)) for bad in batch.unparsed}
        for grant in batch.grants():
            if (held := self.session.running.get(grant.job.job_id)) is not None:
                self.heartbeats.adopt(held, grant.lease)
                continue
            if self.session.stop.is_set():
                await self._hand_back(grant.job, grant.lease, "the runner is stopping")
                continue
            job_run = self.slots.take(JobRun(grant.job, grant.lease))
            started.add(asyncio.create_task(self._run_one(job_run)))
        return started

    async def _run_one(self, job_run: JobRun) -> None:
        session = self.session
        try:
            reported = await self.jobs.handle(job_run)
            if session.options.once:
                if not reported:
                    session.exit_code = EXIT_NOT_REPORTED
                session.stop.set()
        except RunnerExit as exc:
            session.die(exc)
        except Exception as exc:  # one bad job must not stop the runner
            session.status.event(f"✗ internal error: {type(exc).__name__}: {exc}")
        finally:
            self.slots.give_back(job_run)

    async def _lease(self, max_jobs: int) -> LeaseBatch:
        session = self.session
        call = asyncio.create_task(
            session.client.lease_job(
                wait_ms=session.options.wait_ms,
                capabilities=session.options.capabilities,
                status=session.status_text(),
                max_jobs=max_jobs if max_jobs > 1 else None,
            )
        )
        stop = asyncio.create_task(session.stop.wait())
        # Unplugged while the lease is parked: called off, as on a stop (nothing new taken).
        waits = {call, stop}
        if self.laptop is not None:
            waits.add(asyncio.create_task(self.laptop.paused_event.wait()))
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for waiter in waits - {call}:
            waiter.cancel()
        if not call.done():
            with contextlib.suppress(Exception):
                await cancel_and_wait(call)
            return LeaseBatch()
        try:
            reply = call.result()
        except RevokedError as exc:
            raise RunnerExit(EXIT_REVOKED, REVOKED_MESSAGE) from exc
        except ServerUnavailable as exc:
            await session.pause(f"cannot reach server: {exc}")
            return LeaseBatch()
        except ToolCallError as exc:
            await session.pause(f"lease refused: {shorten(str(exc))}")
            return LeaseBatch()
        session.backoff.reset()
        if reply.update_required:
            raise RunnerExit(EXIT_UPDATE_REQUIRED, upgrade_message(PROTOCOL_VERSION))
        session.show()
        return reply

    async def _hand_back(self, job: CaseJob, lease: Lease, why: str) -> None:
        await self.delivery.release(
            job.job_id, lease.lease_epoch, why, title=f"job {job.job_id}", patience_s=10.0
        )

    async def _refuse_unparsed(self, unreadable: Unparsed) -> None:
        """Fail a granted job this runner cannot read, on its own, saying why."""
        message = f"this runner cannot read the job: {unreadable.reason}"
        title = f"job {unreadable.job_id}"
        self.session.status.event(f"{title}: ✗ {message}")
        if unreadable.job_id is None or unreadable.lease_epoch is None:
            return  # no fence to answer with: its lease lapses on its own
        job_id, epoch = unreadable.job_id, unreadable.lease_epoch
        with contextlib.suppress(ToolCallError):
            await self.delivery.deliver(
                lambda: self.session.client.fail_job(
                    job_id=job_id,
                    lease_epoch=epoch,
                    message=message[:FAIL_MESSAGE_CHARS],
                    retryable=False,
                ),
                title=title,
            )
