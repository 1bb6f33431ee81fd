"""The `--max-concurrent` slots: how many there are (`N`, or `auto`: half the cores this
process may run on, at least 1, so a laptop stays usable while it works), and the slots a
case holds — its harness's `slots` (default 1; a browser case may take 2) — from its lease
until it is over.

The lease asks for the free slots only. A case needing more than is left (two `slots: 2`
cases leased at once by a runner of 2) is heartbeaten and waits its turn before it starts,
and nothing more is leased meanwhile: the machine never runs more than it was given.

While the last cases were all short (each under LEASE_AHEAD_BELOW_S), the runner also leases
twice as many jobs again ahead of its slots (LEASE_AHEAD_ROUNDS): each waits its turn,
heartbeaten, and starts the moment a case is over, instead of after a lease's round trip —
which is then a real share of a case. One round ahead is not enough: under load, the reply
to the lease sent when the first slot frees can come after the slots have run that round.
A long case (a `claude` session of minutes) turns it off: nothing is held from the member's
other runners while it would gain nothing. On the first signal a job leased ahead that has
not started is handed back, as a job leased while stopping is.
"""

from __future__ import annotations

import asyncio
import os
from collections import deque
from collections.abc import Callable

import click

from runnercli.case.stageclock import stage_clock
from runnercli.session import JobRun
from runnercli.tasks import wait_event

MAX_CONCURRENT = 64


def usable_cores(
    affinity: Callable[[int], set[int]] | None = getattr(os, "sched_getaffinity", None),
    cpu_count: Callable[[], int | None] = os.cpu_count,
) -> int:
    """The cores this process may run on (its affinity where the OS has one)."""
    if affinity is not None:
        return max(1, len(affinity(0)))
    return max(1, cpu_count() or 1)


def auto_concurrency(cores: int | None = None) -> int:
    """`--max-concurrent auto`: half the cores, at least 1."""
    return max(1, (usable_cores() if cores is None else cores) // 2)


class MaxConcurrent(click.ParamType):
    """An int from 1 to 64, or `auto` (half the cores, at least 1)."""

    name = "N|auto"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and value.strip().lower() == "auto":
            return auto_concurrency()
        else:
            try:
                number = int(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is neither a number nor 'auto'", param, ctx)
        if not 1 <= number <= MAX_CONCURRENT:
            self.fail(f"{number} is not between 1 and {MAX_CONCURRENT}", param, ctx)
        return number


MAX_CONCURRENT_TYPE = MaxConcurrent()


# How long a lease waits for more of the running cases to end, to lease for them too.
LEASE_GATHER_S = 0.005
# Cases shorter than this (each of the last `size` cases) lease their successors ahead.
LEASE_AHEAD_BELOW_S = 1.0
# How many rounds of the slots are leased ahead beside short cases.
LEASE_AHEAD_ROUNDS = 2


class Slots:
    """How many cases run now, out of how many may; told when one is over."""

    def __init__(self, size: int, *, lease_ahead: bool = True) -> None:
        self.size = size
        self.used = 0
        # The slots of the cases that have started (the others wait for room).
        self.running = 0
        self.freed = asyncio.Event()
        self._room = asyncio.Event()
        self.lease_ahead = lease_ahead
        # How long each of the last `size` cases ran, in seconds.
        self._recent: deque[float] = deque(maxlen=size)
        # The cases held that take several slots.
        self._wide = 0

    @property
    def free(self) -> int:
        return max(0, self.size - self.used)

    @property
    def ahead(self) -> int:
        """The slots leased ahead: LEASE_AHEAD_ROUNDS times as many while the last `size`
        cases were all short, none otherwise, nor while a case of several slots is held (it
        is not passed)."""
        recent = self._recent
        if not self.lease_ahead or self._wide or len(recent) < self.size:
            return 0
        return LEASE_AHEAD_ROUNDS * self.size if max(recent) < LEASE_AHEAD_BELOW_S else 0

    @property
    def leasable(self) -> int:
        """How many jobs to lease now: the free slots, and the room ahead of them."""
        return max(0, self.size + self.ahead - self.used)

    def need(self, job_run: JobRun) -> int:
        """Its harness's slots, at least 1, at most all of them (a case needing more than
        the machine has runs alone rather than never)."""
        return min(max(job_run.job.harness.spec.slots or 1, 1), self.size)

    def take(self, job_run: JobRun) -> JobRun:
        job_run.holds_slot = True
        job_run.slots = self.need(job_run)
        job_run.ahead = self.used + job_run.slots > self.size
        self.used += job_run.slots
        self._wide += job_run.slots > 1
        return job_run

    async def start(self, job_run: JobRun, stop: asyncio.Event | None = None) -> None:
        """Wait until the case fits beside those running (at once, when it does), or until
        `stop` is set and `wake` called (then it has not started)."""
        while job_run.holds_slot and self.running > 0 and self.running + job_run.slots > self.size:
            if stop is not None and stop.is_set():
                return
            # Checked and cleared with no await between: a give-back cannot be missed.
            self._room.clear()
            await self._room.wait()
        if job_run.holds_slot:
            job_run.started = True
            job_run.started_at = asyncio.get_running_loop().time()
            self.running += job_run.slots

    def give_back(self, job_run: JobRun) -> None:
        """The job's case is over: its slots may take the next case."""
        if job_run.holds_slot:
            job_run.holds_slot = False
            self.used -= job_run.slots
            self._wide -= job_run.slots > 1
            if job_run.started:
                job_run.started = False
                self.running -= job_run.slots
                ran = asyncio.get_running_loop().time() - job_run.started_at
                self._recent.append(ran)
                if stage_clock.on:
                    stage_clock.held(job_run.job.run_id, ran * job_run.slots)
            self.freed.set()
            self._room.set()

    def wake(self) -> None:
        """Have the cases waiting for room look again (the runner stops)."""
        self._room.set()

    async def wait_for_one(self, stop: asyncio.Event) -> None:
        """Wait until a slot is given back, or `stop` is set."""
        self.freed.clear()
        await _either(self.freed, stop)

    async def gather(self, *, wait: bool = True) -> int:
        """The jobs to lease (`leasable`): when cases are still running, those ending within
        LEASE_GATHER_S are waited for, so one call leases for them all."""
        if not wait:
            return self.leasable
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LEASE_GATHER_S
        while 0 < self.used < self.size and (left := deadline - loop.time()) > 0:
            self.freed.clear()
            if not await wait_event(self.freed, left):
                break
        return self.leasable


async def _either(one: asyncio.Event, other: asyncio.Event) -> None:
    """Wait until either event is set."""
    waits = {asyncio.create_task(one.wait()), asyncio.create_task(other.wait())}
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waits:
        waiter.cancel()
