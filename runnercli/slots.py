"""The `--max-concurrent` slots: a case holds one from its lease until it is over."""

from __future__ import annotations

import asyncio

from runnercli.jobrun import JobRun

# How long a lease waits for more of the running cases to end, to lease for them too.
LEASE_GATHER_S = 0.005


class Slots:
    """How many cases run now, out of how many may; told when one is over."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.used = 0
        self.freed = asyncio.Event()

    @property
    def free(self) -> int:
        return self.size - self.used

    def take(self, job_run: JobRun) -> JobRun:
        job_run.holds_slot = True
        self.used += 1
        return job_run

    def give_back(self, job_run: JobRun) -> None:
        """The job's case is over: its slot may take the next case."""
        if job_run.holds_slot:
            job_run.holds_slot = False
            self.used -= 1
            self.freed.set()

    async def wait_for_one(self, stop: asyncio.Event) -> None:
        """Wait until a slot is given back, or `stop` is set."""
        self.freed.clear()
        stopped = asyncio.create_task(stop.wait())
        freed = asyncio.create_task(self.freed.wait())
        await asyncio.wait({stopped, freed}, return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        freed.cancel()

    async def gather(self, *, wait: bool = True) -> int:
        """The free slots to lease for: when cases are still running, those ending within
        LEASE_GATHER_S are waited for, so one call leases for them all."""
        if not wait:
            return self.free
        loop = asyncio.get_running_loop()
        deadline = loop.time() + LEASE_GATHER_S
        while 0 < self.used < self.size and (left := deadline - loop.time()) > 0:
            self.freed.clear()
            try:
                await asyncio.wait_for(self.freed.wait(), left)
            except TimeoutError:
                break
        return self.free
