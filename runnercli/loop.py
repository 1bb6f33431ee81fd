"""The pull loop: lease workers, heartbeats, log batches, cancel and shutdown.

One MCP session; one leaser long-polls `lease_job` for as many jobs as there are free slots
(`--max-concurrent`), and each job runs in its own task: it heartbeats while the case runs,
pushes log lines in batches and reports the result (or `fail_job` when the case could not
run). Results go through one sender, which groups those that finish together into one call.
The member stays in charge: an allow-list refuses harnesses before anything runs, the first
signal drains, the second one requeues what is running and leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from runnercli.client import (
    RevokedError,
    RunnerClient,
    ServerUnavailable,
    ToolCallError,
)
from runnercli.executor import StartError, clip_utf8, describe_harness, run_case
from runnercli.protocol import (
    MAX_LOG_LINE_BYTES,
    MAX_LOG_LINES_PER_CALL,
    MAX_RESULTS_BYTES_PER_CALL,
    MAX_RESULTS_PER_CALL,
    PROTOCOL_VERSION,
    Ack,
    CaseJob,
    CaseResult,
    Lease,
    LeaseGrant,
    ResultReport,
)
from runnercli.status import StatusLine

EXIT_OK = 0
EXIT_NOT_REPORTED = 1
EXIT_REVOKED = 3
EXIT_UPDATE_REQUIRED = 4

REVOKED_MESSAGE = "this runner was revoked — pair again"
UPGRADE_MESSAGE = (
    "the server needs a newer runner (this one speaks protocol {protocol}) — upgrade it with "
    "`pip install --upgrade everdict`, then start it again"
)

LOG_FLUSH_S = 0.5
LOG_BATCH_LINES = 50
# Lines kept while the server cannot take them; beyond this the oldest are dropped.
LOG_BACKLOG_LINES = 5000
# How long a result is retried while the server is unreachable before it is given up.
DELIVERY_PATIENCE_S = 600.0
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 10.0


@dataclass
class RunOptions:
    capabilities: list[str]
    allow: list[str] = field(default_factory=list)
    max_concurrent: int = 1
    wait_ms: int = 25_000
    once: bool = False


class RunnerExit(Exception):
    """Stop the runner with this exit code and message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class Backoff:
    """Jittered exponential backoff shared by the workers; any success resets it."""

    def __init__(self, base_s: float = BACKOFF_BASE_S, cap_s: float = BACKOFF_CAP_S) -> None:
        self.base_s = base_s
        self.cap_s = cap_s
        self.failures = 0

    def next_delay(self) -> float:
        ceiling = min(self.cap_s, self.base_s * 2**self.failures)
        self.failures = min(self.failures + 1, 16)
        return random.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.failures = 0


def harness_allowed(job: CaseJob, allow: list[str]) -> bool:
    """An empty allow-list allows everything; entries are `name`, `name@N` or `name@vN`."""
    if not allow:
        return True
    name, version = job.harness.name, job.harness.version
    return any(entry in (name, f"{name}@{version}", f"{name}@v{version}") for entry in allow)


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.1f}s"


def _short(reason: str, limit: int = 120) -> str:
    first = reason.strip().splitlines()[0] if reason.strip() else "unknown"
    return first if len(first) <= limit else first[: limit - 1] + "…"


class CaseLog:
    """Log lines of one job, pushed in batches (every LOG_FLUSH_S or LOG_BATCH_LINES lines)."""

    def __init__(self, client: RunnerClient, job_id: int, lease_epoch: int) -> None:
        self.client = client
        self.job_id = job_id
        self.lease_epoch = lease_epoch
        self.pending: list[str] = []
        self.dropped = 0
        self.refused = False
        self._closing = False
        self._wake = asyncio.Event()
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def add(self, line: str) -> None:
        if self.refused:
            return
        # A NUL is no text to show, and PostgreSQL cannot store it.
        self.pending.append(clip_utf8(line.replace("\x00", "\ufffd"), MAX_LOG_LINE_BYTES))
        if len(self.pending) > LOG_BACKLOG_LINES:
            excess = len(self.pending) - LOG_BACKLOG_LINES
            del self.pending[:excess]
            self.dropped += excess
        if len(self.pending) >= LOG_BATCH_LINES:
            self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._pump(), name=f"log-{self.job_id}")

    async def _pump(self) -> None:
        while not self.refused and not self._closing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), LOG_FLUSH_S)
            self._wake.clear()
            await self.flush()

    async def flush(self) -> None:
        """Send what is pending; lines stay pending while the server cannot take them."""
        async with self._lock:
            while self.pending and not self.refused:
                if self.dropped:
                    self.pending.insert(0, f"[{self.dropped} log lines dropped]")
                    self.dropped = 0
                batch = self.pending[:MAX_LOG_LINES_PER_CALL]
                try:
                    ack = await self.client.report_case_log(
                        job_id=self.job_id, lease_epoch=self.lease_epoch, lines=batch
                    )
                except ServerUnavailable:
                    return  # kept for the next flush
                except ToolCallError:
                    # Sending the same batch again would be refused again.
                    del self.pending[: len(batch)]
                    self.dropped += len(batch)
                    continue
                del self.pending[: len(batch)]
                if not ack.accepted:
                    self.refused = True
                    self.pending.clear()

    async def close(self, *, flush: bool = True) -> None:
        """Stop pushing; with `flush`, send what is left (after a push in flight lands)."""
        self._closing = True
        if self._task is not None:
            if flush:
                self._wake.set()
            else:
                self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if flush:
            await self.flush()


# A result ready to send, and the future its case awaits the ack on.
_Waiting = tuple[ResultReport, asyncio.Future[Ack]]


class ResultSender:
    """Submit results as they become ready, together when they queue up behind a call.

    A result that finds no submit in flight goes at once, alone; those that become ready
    while one is in flight wait for it, then go in one `submit_job_results` call. Each
    caller awaits its own ack and sees its own error, so retries and refusals stay per job.
    """

    def __init__(self, client: RunnerClient) -> None:
        self.client = client
        # Off for good once the server turns out not to know `submit_job_results`.
        self.batches = True
        self._queue: list[_Waiting] = []
        self._sending: list[_Waiting] = []
        self._pump: asyncio.Task[None] | None = None

    async def submit(self, report: ResultReport) -> Ack:
        """Send one result, with any waiting beside it; raise what the client raises."""
        if not self.batches:
            return await self._submit_one(report)
        future: asyncio.Future[Ack] = asyncio.get_running_loop().create_future()
        self._queue.append((report, future))
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._drain(), name="results")
        return await future

    @property
    def in_flight(self) -> int:
        """How many results the call now in flight carries."""
        return len(self._sending)

    async def close(self) -> None:
        """Stop sending; whoever still awaits an ack is canceled."""
        if self._pump is not None:
            self._pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump
        for _, future in [*self._sending, *self._queue]:
            future.cancel()
        self._sending, self._queue = [], []

    async def _drain(self) -> None:
        while self._queue:
            self._sending = self._take()
            if len(self._sending) > 1 and self.batches:
                await self._send_together(self._sending)
            else:
                await self._send_alone(self._sending)
            self._sending = []

    def _take(self) -> list[_Waiting]:
        """The oldest queued results that fit in one call and are still awaited."""
        batch: list[_Waiting] = []
        size = 0
        while self._queue and len(batch) < MAX_RESULTS_PER_CALL:
            report, future = self._queue[0]
            weight = _weight(report)
            if batch and size + weight > MAX_RESULTS_BYTES_PER_CALL:
                break
            del self._queue[0]
            if not future.done():  # its case stopped waiting
                batch.append((report, future))
                size += weight
        return batch

    async def _send_together(self, batch: list[_Waiting]) -> None:
        try:
            acks = await self.client.submit_job_results([report for report, _ in batch])
        except ToolCallError as exc:
            if "unknown tool" in str(exc).lower():
                self.batches = False
            # Refused as a whole: alone, each result gets an answer of its own, and only a
            # bad one is refused.
            await self._send_alone(batch)
            return
        except Exception as exc:
            for _, future in batch:
                _settle(future, exc)
            return
        for (_, future), ack in zip(batch, acks, strict=True):
            _settle(future, ack)

    async def _send_alone(self, batch: list[_Waiting]) -> None:
        await asyncio.gather(*(self._forward(report, future) for report, future in batch))

    async def _forward(self, report: ResultReport, future: asyncio.Future[Ack]) -> None:
        try:
            ack = await self._submit_one(report)
        except Exception as exc:
            _settle(future, exc)
        else:
            _settle(future, ack)

    async def _submit_one(self, report: ResultReport) -> Ack:
        return await self.client.submit_job_result(
            job_id=report.job_id, lease_epoch=report.lease_epoch, result=report.result
        )


def _weight(report: ResultReport) -> int:
    # Weighed as sent (JSON-escaped), never less than the raw bytes the server counts: a
    # batch of heavily escaped text stays within the server's request size as well.
    return len(report.result.model_dump_json(include={"output", "stderr_tail"}))


def _settle(future: asyncio.Future[Ack], outcome: Ack | Exception) -> None:
    if future.done():  # its case stopped waiting
        return
    if isinstance(outcome, Ack):
        future.set_result(outcome)
    else:
        future.set_exception(outcome)


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


class RunnerLoop:
    """Lease, run and report until told to stop."""

    def __init__(self, client: RunnerClient, options: RunOptions, status: StatusLine) -> None:
        self.client = client
        self.options = options
        self.status = status
        self.backoff = Backoff()
        self.results = ResultSender(client)
        self.running: dict[int, JobRun] = {}
        self.last_failure: str | None = None
        self.exit_code = EXIT_OK
        self.seen_harnesses: set[tuple[str, int]] = set()
        self._stop = asyncio.Event()
        self._abort = asyncio.Event()
        self._fatal: RunnerExit | None = None
        self._fatal_event = asyncio.Event()

    # ---- what the runner says about itself

    def status_text(self) -> str:
        """The short status sent with lease and heartbeat, and shown on the status line."""
        count = len(self.running)
        if self._stop.is_set():
            return (
                f"draining, running {count} job{'s' if count != 1 else ''}" if count else "stopping"
            )
        if count:
            return f"running {count} job{'s' if count != 1 else ''}"
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
            workers = [asyncio.create_task(self._leaser())]
            fatal = asyncio.create_task(self._fatal_event.wait())
            await asyncio.wait([*workers, fatal], return_when=asyncio.FIRST_COMPLETED)
            # Either every worker finished, or one hit a fatal error and the rest must go.
            if self._fatal is not None:
                for worker in workers:
                    worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            fatal.cancel()
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
            allowed = ", ".join(self.options.allow) or "any harness"
            slots = 1 if self.options.once else self.options.max_concurrent
            self.status.event(
                f"connected to {self.client.url} as runner {hello.runner_id} “{hello.label}” of "
                f"{hello.owner}; capabilities: {', '.join(self.options.capabilities)}; "
                f"allowed: {allowed}; up to {slots} case(s) at once"
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

    async def _leaser(self) -> None:
        slots = 1 if self.options.once else self.options.max_concurrent
        busy: set[asyncio.Task[None]] = set()
        try:
            while not self._stop.is_set() and self._fatal is None:
                free = slots - len(busy)
                if free <= 0:
                    await asyncio.wait(busy, return_when=asyncio.FIRST_COMPLETED)
                    busy = {task for task in busy if not task.done()}
                    continue
                try:
                    grants = await self._lease(max_jobs=free)
                except RunnerExit as exc:
                    self._die(exc)
                    return
                for grant in grants:
                    if self._stop.is_set():
                        await self._hand_back(grant.job, grant.lease, "the runner is stopping")
                        continue
                    busy.add(asyncio.create_task(self._run_one(grant.job, grant.lease)))
                if self.options.once and busy:
                    break
            await asyncio.gather(*busy, return_exceptions=True)
        finally:
            for task in busy:
                task.cancel()
            await asyncio.gather(*busy, return_exceptions=True)

    async def _run_one(self, job: CaseJob, lease: Lease) -> None:
        try:
            reported = await self._handle(JobRun(job, lease))
            if self.options.once:
                if not reported:
                    self.exit_code = EXIT_NOT_REPORTED
                self._stop.set()
        except RunnerExit as exc:
            self._die(exc)
        except Exception as exc:  # one bad job must not stop the runner
            self.status.event(f"✗ internal error: {type(exc).__name__}: {exc}")

    async def _lease(self, max_jobs: int) -> list[LeaseGrant]:
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
            return []
        try:
            reply = call.result()
        except RevokedError as exc:
            raise RunnerExit(EXIT_REVOKED, REVOKED_MESSAGE) from exc
        except ServerUnavailable as exc:
            await self._pause(f"cannot reach server: {exc}")
            return []
        except ToolCallError as exc:
            await self._pause(f"lease refused: {_short(str(exc))}")
            return []
        self.backoff.reset()
        if reply.update_required:
            raise RunnerExit(
                EXIT_UPDATE_REQUIRED, UPGRADE_MESSAGE.format(protocol=PROTOCOL_VERSION)
            )
        self._show()
        return reply.grants()

    async def _hand_back(self, job: CaseJob, lease: Lease, why: str) -> None:
        with contextlib.suppress(ToolCallError):
            await self._deliver(
                lambda: self.client.fail_job(
                    job_id=job.job_id, lease_epoch=lease.lease_epoch, message=why, retryable=True
                ),
                patience_s=10.0,
            )

    # ---- one job

    async def _handle(self, job_run: JobRun) -> bool:
        """Run one leased job and report it; return whether the server took the report."""
        job = job_run.job
        self.running[job.job_id] = job_run
        self._show()
        log = CaseLog(self.client, job.job_id, job_run.lease.lease_epoch)
        heartbeat = asyncio.create_task(self._heartbeat(job_run))
        try:
            if not harness_allowed(job, self.options.allow):
                return await self._refuse(job_run, log)
            key = (job.harness.name, job.harness.version)
            if key not in self.seen_harnesses:
                self.seen_harnesses.add(key)
                self.status.event(describe_harness(job))
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
            return await self._report(job_run, log, result)
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
            await log.close(flush=False)
            self.running.pop(job.job_id, None)
            self._show()

    async def _refuse(self, job_run: JobRun, log: CaseLog) -> bool:
        job = job_run.job
        message = (
            f"harness {job.harness.name} v{job.harness.version} is not allowed on this runner "
            f"(allowed: {', '.join(self.options.allow)})"
        )
        log.add(f"✗ refused: {message}")
        await log.flush()
        self.status.result(f"{job_run.title}: ✗ refused: {message}")
        self.last_failure = _short(f"refused {job.harness.name}")
        return await self._fail(job_run, message, retryable=False)

    async def _report_start_error(self, job_run: JobRun, log: CaseLog, message: str) -> bool:
        log.add(f"✗ failed: {message}")
        await log.close()
        self.status.result(f"{job_run.title}: ✗ failed: {message}")
        self.last_failure = _short(message)
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
        self.last_failure = _short(reason)
        return f"✗ failed: {reason}"

    async def _fail(self, job_run: JobRun, message: str, *, retryable: bool) -> bool:
        try:
            return await self._deliver(
                lambda: self.client.fail_job(
                    job_id=job_run.job.job_id,
                    lease_epoch=job_run.lease.lease_epoch,
                    message=message[:4000],
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
