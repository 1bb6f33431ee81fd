"""Heartbeats, and waking from a sleep: a lapsed lease is resumed, not rerun.

A laptop that sleeps (or a runner process that is stopped) misses its heartbeats; its leases
lapse and the server puts the jobs back in the queue with their fence kept. The cases' work
is still there, so on waking the runner heartbeats every case it holds at once: a lease
nobody took meanwhile is resumed (the server answers `resumed`); a job another runner took
is refused, and its case is stopped — the other runner does that work now. Leasing waits
until this round is done, so the runner never claims its own lapsed job afresh while the
case still runs here; should a lease call already in flight bring such a job back, the
running case goes on under the new lease instead of starting twice.

The runner notices a sleep by its clocks — the wall or boot-time clock jumped against the
monotonic one (the machine slept), or the event loop did not run for a while (the process
was stopped) — or by a heartbeat that answers `resumed`.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from runnercli.client import RevokedError, ServerUnavailable, ToolCallError
from runnercli.console.exits import EXIT_REVOKED, REVOKED_MESSAGE, RunnerExit
from runnercli.protocol import Lease
from runnercli.session import JobRun, Session

# A gap in the clocks at least this long is a sleep (shorter ones cannot lapse a lease whose
# heartbeats come every third of its TTL, unless the TTL is very short — and then a
# heartbeat answering `resumed` says so).
SLEEP_THRESHOLD_S = 10.0
TICK_S = 1.0

# What one heartbeat found, in the order the wake-up line names them.
RESUMED, KEPT, TAKEN, CANCELED, LOST, UNCONFIRMED = (
    "resumed",
    "kept",
    "taken",
    "canceled",
    "lost",
    "unconfirmed",
)
PHRASES = {
    RESUMED: "{n} case{s} resumed",
    KEPT: "{n} case{s} still leased",
    TAKEN: "{n} taken by another runner",
    CANCELED: "{n} canceled",
    LOST: "{n} lost ({reason})",
    UNCONFIRMED: "{n} not confirmed yet (server unreachable)",
}


@dataclass(frozen=True)
class Beat:
    kind: str
    reason: str = ""


def _clocks() -> tuple[float, ...]:
    clocks = [time.monotonic(), time.time()]
    boottime = getattr(time, "CLOCK_BOOTTIME", None)  # Linux: counts suspended time too
    if boottime is not None:
        clocks.append(time.clock_gettime(boottime))
    return tuple(clocks)


class SleepWatch:
    """Call `on_wake(seconds)` when this process did not run for `threshold_s` or more."""

    def __init__(
        self,
        on_wake: Callable[[float], None],
        *,
        threshold_s: float = SLEEP_THRESHOLD_S,
        tick_s: float = TICK_S,
    ) -> None:
        self.on_wake = on_wake
        self.threshold_s = threshold_s
        self.tick_s = tick_s
        self._before = _clocks()

    def take_gap(self) -> float | None:
        """The sleep since the last look, if there was one (each sleep is told once)."""
        now = _clocks()
        gap = max(a - b for a, b in zip(now, self._before, strict=True)) - self.tick_s
        self._before = now
        return gap if gap >= self.threshold_s else None

    async def run(self) -> None:
        self._before = _clocks()
        while True:
            await asyncio.sleep(self.tick_s)
            if (gap := self.take_gap()) is not None:
                self.on_wake(gap)


def duration(seconds: float) -> str:
    """`14 s`, `14 min`, `2 h 5 min`."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60} min"


def wake_summary(slept_s: float | None, beats: list[Beat]) -> str:
    """`slept 14 min — 1 case resumed, 1 taken by another runner`."""
    head = f"slept {duration(slept_s)}" if slept_s is not None else "a lease had lapsed"
    if not beats:
        return f"{head} — no case held"
    counts = Counter(beat.kind for beat in beats)
    parts = []
    for kind, phrase in PHRASES.items():
        if n := counts.get(kind):
            reason = next((b.reason for b in beats if b.kind == kind), "")
            parts.append(phrase.format(n=n, s="" if n == 1 else "s", reason=reason))
    return f"{head} — {', '.join(parts)}"


class Heartbeats:
    """Heartbeat each held case; on waking, heartbeat them all before leasing again."""

    def __init__(self, session: Session) -> None:
        self.session = session
        # Set while leasing may go on; cleared during a wake-up round.
        self.awake = asyncio.Event()
        self.awake.set()
        self._wake_round: asyncio.Task[None] | None = None
        self.sleep_watch = SleepWatch(self.woke)

    def woke(self, slept_s: float | None) -> None:
        """Start a wake-up round, unless one is under way."""
        if self._wake_round is not None and not self._wake_round.done():
            return
        if slept_s is None:
            # A heartbeat said so first: the clocks tell how long, and the watch will not
            # tell this sleep again.
            slept_s = self.sleep_watch.take_gap()
        self.awake.clear()
        self._wake_round = asyncio.create_task(self._wake_up(slept_s), name="wake")

    async def _wake_up(self, slept_s: float | None) -> None:
        try:
            held = list(self.session.running.values())
            beats = await asyncio.gather(*(self.beat(job_run) for job_run in held))
            # A case whose own heartbeat resumed it just before this round was resumed too.
            found = [
                Beat(RESUMED) if beat.kind == KEPT and job_run.resumed else beat
                for job_run, beat in zip(held, beats, strict=True)
            ]
            for job_run in held:
                job_run.resumed = False
            self.session.status.event(wake_summary(slept_s, found))
        finally:
            self.awake.set()
            self.session.show()

    async def keep(self, job_run: JobRun) -> None:
        """Heartbeat the job until the task is cancelled or the server takes the job back."""
        interval = max(0.1, job_run.lease.heartbeat_ms / 1000)
        while True:
            await asyncio.sleep(interval)
            beat = await self.beat(job_run)
            if beat.kind in (RESUMED, TAKEN):
                # A lease lapsed: the others this runner holds may have lapsed as well.
                self.woke(None)
            if beat.kind not in (RESUMED, KEPT, UNCONFIRMED):
                return

    async def beat(self, job_run: JobRun) -> Beat:
        """One heartbeat of the job; a job the server took back is stopped here."""
        # Nor crossing a log push of the same job: after a sleep, whichever call comes first
        # takes the lease back, and the push says so before this beat is read.
        async with job_run.calls:
            return await self._beat_once(job_run)

    def resumed_elsewhere(self, job_run: JobRun) -> None:
        """Another call of the job (a log push) took its lapsed lease back."""
        job_run.resumed = True
        self.woke(None)

    async def _beat_once(self, job_run: JobRun) -> Beat:
        epoch = job_run.epoch
        try:
            ack = await self.session.client.heartbeat_job(
                job_id=job_run.job.job_id, lease_epoch=epoch, status=self.session.status_text()
            )
        except RevokedError:
            self.session.die(RunnerExit(EXIT_REVOKED, REVOKED_MESSAGE))
            return Beat(LOST, "revoked")
        except (ServerUnavailable, ToolCallError):
            return Beat(UNCONFIRMED)  # the lease outlives a few missed beats
        if ack.accepted:
            job_run.resumed = job_run.resumed or ack.resumed
            return Beat(RESUMED if ack.resumed else KEPT)
        if epoch != job_run.epoch:
            return Beat(KEPT)  # leased to this runner again meanwhile: the new fence holds
        reason = ack.reason or ("canceled" if ack.cancel else "lease lost")
        kind = CANCELED if ack.cancel else TAKEN if reason.startswith("stale lease") else LOST
        if not job_run.finished:
            # The server took the job back: end the case now and report nothing more.
            job_run.canceled = ack.cancel
            job_run.lost_reason = reason
            job_run.kill.set()
        return Beat(kind, reason)

    def adopt(self, job_run: JobRun, lease: Lease) -> None:
        """A grant of a job whose case still runs here: the case goes on under it."""
        job_run.lease = lease
        self.session.status.event(
            f"{job_run.title}: leased to this runner again while its case still runs here; "
            "it goes on under the new lease"
        )
