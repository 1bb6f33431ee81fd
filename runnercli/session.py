"""What every part of a running runner shares: its session with the server, its state, and
the jobs it holds.

The parts (`runnercli.case.delivery`, `runnercli.case.heartbeats`, `runnercli.case.consent`,
the case pipeline in `runnercli.case`, the laptop in `runnercli.laptop`) are objects built from
one `Session` and handed the other parts they need; `runnercli.commands.loop` puts them
together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from runnercli.client import RunnerClient
from runnercli.client.backoff import Backoff
from runnercli.console.exits import EXIT_OK, RunnerExit
from runnercli.console.status import StatusLine
from runnercli.options import RunOptions
from runnercli.protocol import CaseJob, Lease
from runnercli.tasks import wait_event


@dataclass
class JobRun:
    """One leased job as the runner holds it: its lease, and what happened to it."""

    job: CaseJob
    # The lease it runs under; a new grant of the same job (leased again while this runner
    # slept) replaces it, and every later call carries the new fence.
    lease: Lease
    kill: asyncio.Event = field(default_factory=asyncio.Event)
    # Set when the server took the job back (canceled, lease lost): nothing more is reported.
    lost_reason: str | None = None
    canceled: bool = False
    # Set on the second signal: the case is killed and handed back for another attempt.
    abandoned: bool = False
    # The case is over; its report is on its way (the lease is still heartbeaten until the
    # server acknowledges it).
    finished: bool = False
    # It counts against `--max-concurrent` until its case is over (not until its report is
    # acknowledged: the slot takes the next case while the result is on its way).
    holds_slot: bool = False
    # How many slots its case takes (its harness's `slots`, within `--max-concurrent`), and
    # whether its case has started in them (a case leased beside a big one waits for room).
    slots: int = 1
    started: bool = False
    started_at: float = 0.0
    # Leased ahead of the slots (beside short cases): it waits for one to be over.
    ahead: bool = False
    # A heartbeat took its lapsed lease back since the last wake-up round.
    resumed: bool = False
    # One fenced call of the job at a time, a heartbeat or a push of its log: after a sleep,
    # two crossing on a lapsed lease would race to take it back, and the loser would read as
    # a lease lost.
    calls: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def title(self) -> str:
        job = self.job
        return f"run {job.run_id} case {job.case.key}"

    @property
    def waiting_ahead(self) -> bool:
        """Leased ahead, waiting for a slot: not running yet."""
        return self.ahead and self.holds_slot and not self.started

    @property
    def epoch(self) -> int:
        return self.lease.lease_epoch


def _jobs(count: int) -> str:
    return f"{count} job{'s' if count != 1 else ''}"


class Session:
    """The client, the options, the status line, backoff, stop and abort, the fatal exit and
    the jobs held of one runner session."""

    def __init__(
        self,
        client: RunnerClient,
        options: RunOptions,
        status: StatusLine,
        *,
        say: Callable[[], str] | None = None,
    ) -> None:
        self.client = client
        self.options = options
        self.status = status
        self.backoff = Backoff()
        self.running: dict[int, JobRun] = {}
        # The first signal: take no new job. The second: hand the running ones back.
        self.stop = asyncio.Event()
        self.abort = asyncio.Event()
        self.fatal: RunnerExit | None = None
        self.fatal_event = asyncio.Event()
        self.exit_code = EXIT_OK
        self.last_failure: str | None = None
        # How the runner describes itself: its own words unless the runner adds to them
        # (a question waiting for the member, a pause).
        self._say = say or self.words

    # ---- what the runner says about itself

    def status_text(self) -> str:
        """The short status sent with lease and heartbeat, and shown on the status line."""
        return self.options.redactor.text(self._say())

    def words(self, paused: str = "") -> str:
        """The status from the session's own state, with a pause when there is one."""
        # Jobs leased ahead that have not started are not running yet.
        count = sum(1 for held in self.running.values() if not held.waiting_ahead)
        if self.stop.is_set():
            return f"draining, running {_jobs(count)}" if count else "stopping"
        if count:
            return f"running {_jobs(count)}; {paused}" if paused else f"running {_jobs(count)}"
        if paused:
            return paused
        if self.last_failure:
            return f"last job failed: {self.last_failure}"
        return "idle"

    def show(self) -> None:
        self.status.set(self.status_text())

    # ---- stopping

    def request_stop(self) -> None:
        """First call: take no new job, finish the running ones. Second: requeue them, leave."""
        if not self.stop.is_set():
            self.stop.set()
            if count := len(self.running):
                self.status.event(
                    f"stopping: finishing {count} running case(s); "
                    "signal again to hand them back and exit"
                )
            self.show()
            return
        if not self.abort.is_set():
            self.abort.set()
            self.status.event(f"aborting: handing back {len(self.running)} running case(s)")
            for job_run in self.running.values():
                job_run.abandoned = True
                job_run.kill.set()

    def die(self, exc: RunnerExit) -> None:
        """Stop the whole runner with `exc`: every case held is ended, nothing more reported."""
        if self.fatal is None:
            self.fatal = exc
        for job_run in self.running.values():
            job_run.lost_reason = str(exc)
            job_run.kill.set()
        self.fatal_event.set()

    async def pause(self, why: str, *, until: asyncio.Event | None = None) -> None:
        """Wait a backoff delay, cut short by `until` (a stop by default), saying why."""
        delay = self.backoff.next_delay()
        self.status.set(f"{why}, retrying in {delay:.1f}s")
        await wait_event(until or self.stop, delay)
