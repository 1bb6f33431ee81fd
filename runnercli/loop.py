"""The pull loop: lease workers, heartbeats, log batches, cancel and shutdown.

One MCP session; one leaser long-polls `lease_job` for as many jobs as there are free slots
(`--max-concurrent`), and each job runs in its own task: it heartbeats while the case runs,
pushes log lines in batches and reports the result (or `fail_job` when the case could not
run). Results go through one sender, which groups those that finish together into one call.
The member stays in charge: nothing runs without their consent (`runnercli.consent`), the first
signal drains, the second one requeues what is running and leaves.

Here: the runner's lifecycle, its greeting and the leaser. One job's handling is in
`runnercli.job`, its log in `runnercli.caselog`, the result sender in `runnercli.results`,
delivery and the spool in `runnercli.delivery`, heartbeats and waking from a sleep in
`runnercli.sleep`, plan-limit pauses in `runnercli.ratelimit`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from dataclasses import dataclass, field
from pathlib import Path

from runnercli.backoff import Backoff
from runnercli.client import RevokedError, RunnerClient, ServerUnavailable, ToolCallError
from runnercli.consent import Consent, ConsentSettings
from runnercli.exits import (
    EXIT_NOT_REPORTED,
    EXIT_OK,
    EXIT_REVOKED,
    EXIT_UPDATE_REQUIRED,
    REVOKED_MESSAGE,
    UPGRADE_MESSAGE,
    RunnerExit,
)
from runnercli.job import JobHandling
from runnercli.leases import LeaseBatch, Unparsed
from runnercli.parts import JobRun
from runnercli.protocol import (
    FAIL_MESSAGE_CHARS,
    MAX_STATUS_CHARS,
    PROTOCOL_VERSION,
    CaseJob,
    Lease,
)
from runnercli.results import ResultSender
from runnercli.sleep import SleepWatch
from runnercli.spool import Spool
from runnercli.status import StatusLine, shorten
from runnercli.tools import ToolVersions

# How long a lease waits for more of the running cases to end, to lease for them too.
LEASE_GATHER_S = 0.005


@dataclass
class RunOptions:
    capabilities: list[str]
    # What may run here, and whether to ask (`--allow-any` is printed loudly at start).
    consent: ConsentSettings = field(default_factory=ConsentSettings)
    max_concurrent: int = 1
    wait_ms: int = 25_000
    once: bool = False
    # Where finished cases' results wait for the server's answer (beside the config file).
    spool_dir: Path | None = None


class RunnerLoop(JobHandling):
    """Lease, run and report until told to stop."""

    def __init__(self, client: RunnerClient, options: RunOptions, status: StatusLine) -> None:
        self.client = client
        self.options = options
        self.status = status
        self.backoff = Backoff()
        self.results = ResultSender(client)
        self.running: dict[int, JobRun] = {}
        self.spool = Spool(options.spool_dir, client.url) if options.spool_dir else None
        self.paused_until: float | None = None
        self.pause_reason = ""
        self._awake = asyncio.Event()
        self._awake.set()
        self._wake_round_task: asyncio.Task[None] | None = None
        self.sleep_watch = SleepWatch(self._woke)
        self.last_failure: str | None = None
        self.exit_code = EXIT_OK
        self.consent = Consent(options.consent, status, on_change=self._show)
        self.tools = ToolVersions()
        self._stop = asyncio.Event()
        self._abort = asyncio.Event()
        self._fatal: RunnerExit | None = None
        self._fatal_event = asyncio.Event()
        # Cases running now (each holding one of the `--max-concurrent` slots); set when one
        # is over.
        self._slots_used = 0
        self._slot_freed = asyncio.Event()

    # ---- what the runner says about itself

    def status_text(self) -> str:
        """The short status sent with lease and heartbeat, and shown on the status line."""
        count = len(self.running)
        if waiting := self.consent.waiting_on():
            return shorten(f"waiting for consent on {waiting}", MAX_STATUS_CHARS)
        if self._stop.is_set():
            return (
                f"draining, running {count} job{'s' if count != 1 else ''}" if count else "stopping"
            )
        paused = self.pause_text()
        if count:
            running = f"running {count} job{'s' if count != 1 else ''}"
            return f"{running}; {paused}" if paused else running
        if paused:
            return paused
        if self.last_failure:
            return f"last job failed: {self.last_failure}"
        return "idle"

    def _show(self) -> None:
        self.status.set(self.status_text())

    # ---- lifecycle

    async def run(self) -> int:
        self._install_signals()
        try:
            await self._greet()
            if self._stop.is_set():
                return self.exit_code
            # What an earlier run finished but could not deliver goes first.
            await self._resend_spooled()
            workers = [asyncio.create_task(self._leaser())]
            watcher = asyncio.create_task(self.sleep_watch.run(), name="sleep-watch")
            fatal = asyncio.create_task(self._fatal_event.wait())
            await asyncio.wait([*workers, fatal], return_when=asyncio.FIRST_COMPLETED)
            # Either every worker finished, or one hit a fatal error and the rest must go.
            if self._fatal is not None:
                for worker in workers:
                    worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            fatal.cancel()
            watcher.cancel()
        except RunnerExit as exc:
            self._fatal = exc
        finally:
            await self.results.close()
            self._remove_signals()
        if self._fatal is not None:
            self.status.event(f"✗ {self._fatal}")
            return self._fatal.code
        self.status.event("stopped")
        return self.exit_code

    def _die(self, exc: RunnerExit) -> None:
        if self._fatal is None:
            self._fatal = exc
        for job_run in self.running.values():
            job_run.lost_reason = str(exc)
            job_run.kill.set()
        self._fatal_event.set()

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(sig, self.request_stop)

    def _remove_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)

    def request_stop(self) -> None:
        """First call: take no new job, finish the running ones. Second: requeue them, leave."""
        if not self._stop.is_set():
            self._stop.set()
            count = len(self.running)
            if count:
                self.status.event(
                    f"stopping: finishing {count} running case(s); "
                    "signal again to hand them back and exit"
                )
            self._show()
            return
        if not self._abort.is_set():
            self._abort.set()
            self.status.event(f"aborting: handing back {len(self.running)} running case(s)")
            for job_run in self.running.values():
                job_run.abandoned = True
                job_run.kill.set()

    async def _greet(self) -> None:
        while not self._stop.is_set():
            try:
                hello = await self.client.hello(
                    capabilities=self.options.capabilities, status=self.status_text()
                )
            except ServerUnavailable as exc:
                await self._pause(f"cannot reach server: {exc}")
                continue
            except RevokedError as exc:
                raise RunnerExit(EXIT_REVOKED, REVOKED_MESSAGE) from exc
            except ToolCallError as exc:
                raise RunnerExit(
                    EXIT_NOT_REPORTED, f"the server refused this runner: {exc}"
                ) from exc
            self.backoff.reset()
            if hello.update_required:
                raise RunnerExit(
                    EXIT_UPDATE_REQUIRED, UPGRADE_MESSAGE.format(protocol=PROTOCOL_VERSION)
                )
            if self.options.consent.allow_any:
                self.status.event(
                    "⚠ --allow-any: this runner runs any harness the server sends, as you, "
                    "without asking. Use it on throwaway machines only."
                )
            slots = 1 if self.options.once else self.options.max_concurrent
            self.status.event(
                f"connected to {self.client.url} as runner {hello.runner_id} “{hello.label}” of "
                f"{hello.owner}; capabilities: {', '.join(self.options.capabilities)}; "
                f"allowed: {self.consent.policy()}; up to {slots} case(s) at once"
            )
            self._show()
            return

    async def _pause(self, why: str, *, until: asyncio.Event | None = None) -> None:
        """Wait a backoff delay, cut short by `until` (a stop by default), saying why."""
        delay = self.backoff.next_delay()
        self.status.set(f"{why}, retrying in {delay:.1f}s")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for((until or self._stop).wait(), delay)

    # ---- leasing

    def _take_slot(self, job_run: JobRun) -> JobRun:
        job_run.holds_slot = True
        self._slots_used += 1
        return job_run

    def _free_slot(self, job_run: JobRun) -> None:
        if job_run.holds_slot:
            job_run.holds_slot = False
            self._slots_used -= 1
            self._slot_freed.set()

    async def _gather_slots(self, slots: int) -> int:
        """The free slots to lease for: when cases are still running, those ending within
        LEASE_GATHER_S are waited for, so one call leases for them all."""
        if self.options.once:
            return slots - self._slots_used
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LEASE_GATHER_S
        while 0 < self._slots_used < slots and (left := deadline - loop.time()) > 0:
            self._slot_freed.clear()
            try:
                await asyncio.wait_for(self._slot_freed.wait(), left)
            except TimeoutError:
                break
        return slots - self._slots_used

    async def _leaser(self) -> None:
        slots = 1 if self.options.once else self.options.max_concurrent
        busy: set[asyncio.Task[None]] = set()
        try:
            while not self._stop.is_set() and self._fatal is None:
                busy = {task for task in busy if not task.done()}
                # A slot is free once its case is over, while its result is still on its way.
                free = slots - self._slots_used
                if free <= 0:
                    self._slot_freed.clear()
                    stop = asyncio.create_task(self._stop.wait())
                    freed = asyncio.create_task(self._slot_freed.wait())
                    await asyncio.wait({stop, freed}, return_when=asyncio.FIRST_COMPLETED)
                    stop.cancel()
                    freed.cancel()
                    continue
                # After a sleep, what this runner holds is heartbeaten before it leases more;
                # under a plan limit, it leases nothing until the wait is over.
                await self._awake.wait()
                await self._wait_while_paused()
                if self._stop.is_set():
                    break
                free = await self._gather_slots(slots)
                try:
                    batch = await self._lease(max_jobs=free)
                except RunnerExit as exc:
                    self._die(exc)
                    return
                for unreadable in batch.unparsed:
                    busy.add(asyncio.create_task(self._refuse_unparsed(unreadable)))
                for grant in batch.grants():
                    if (held := self.running.get(grant.job.job_id)) is not None:
                        self._adopt(held, grant.lease)
                        continue
                    if self._stop.is_set():
                        await self._hand_back(grant.job, grant.lease, "the runner is stopping")
                        continue
                    job_run = self._take_slot(JobRun(grant.job, grant.lease))
                    busy.add(asyncio.create_task(self._run_one(job_run)))
                if self.options.once and busy:
                    break
            await asyncio.gather(*busy, return_exceptions=True)
        finally:
            for task in busy:
                task.cancel()
            await asyncio.gather(*busy, return_exceptions=True)

    async def _run_one(self, job_run: JobRun) -> None:
        try:
            reported = await self._handle(job_run)
            if self.options.once:
                if not reported:
                    self.exit_code = EXIT_NOT_REPORTED
                self._stop.set()
        except RunnerExit as exc:
            self._die(exc)
        except Exception as exc:  # one bad job must not stop the runner
            self.status.event(f"✗ internal error: {type(exc).__name__}: {exc}")
        finally:
            self._free_slot(job_run)

    async def _lease(self, max_jobs: int) -> LeaseBatch:
        call = asyncio.create_task(
            self.client.lease_job(
                wait_ms=self.options.wait_ms,
                capabilities=self.options.capabilities,
                status=self.status_text(),
                max_jobs=max_jobs if max_jobs > 1 else None,
            )
        )
        stop = asyncio.create_task(self._stop.wait())
        await asyncio.wait({call, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        if not call.done():
            call.cancel()
            with contextlib.suppress(BaseException):
                await call
            return LeaseBatch()
        try:
            reply = call.result()
        except RevokedError as exc:
            raise RunnerExit(EXIT_REVOKED, REVOKED_MESSAGE) from exc
        except ServerUnavailable as exc:
            await self._pause(f"cannot reach server: {exc}")
            return LeaseBatch()
        except ToolCallError as exc:
            await self._pause(f"lease refused: {shorten(str(exc))}")
            return LeaseBatch()
        self.backoff.reset()
        if reply.update_required:
            raise RunnerExit(
                EXIT_UPDATE_REQUIRED, UPGRADE_MESSAGE.format(protocol=PROTOCOL_VERSION)
            )
        self._show()
        return reply

    async def _hand_back(self, job: CaseJob, lease: Lease, why: str) -> None:
        await self._release(
            job.job_id, lease.lease_epoch, why, title=f"job {job.job_id}", patience_s=10.0
        )

    async def _refuse_unparsed(self, unreadable: Unparsed) -> None:
        """Fail a granted job this runner cannot read, on its own, saying why."""
        message = f"this runner cannot read the job: {unreadable.reason}"
        title = f"job {unreadable.job_id}"
        self.status.event(f"{title}: ✗ {message}")
        if unreadable.job_id is None or unreadable.lease_epoch is None:
            return  # no fence to answer with: its lease lapses on its own
        job_id, epoch = unreadable.job_id, unreadable.lease_epoch
        with contextlib.suppress(ToolCallError):
            await self._deliver(
                lambda: self.client.fail_job(
                    job_id=job_id,
                    lease_epoch=epoch,
                    message=message[:FAIL_MESSAGE_CHARS],
                    retryable=False,
                ),
                title=title,
            )
