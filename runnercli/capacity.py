"""How much the runner takes on at once: `--max-concurrent N|auto`, and the slots cases hold.

`auto` is half the cores this process may run on, at least 1: a laptop stays usable while
it works. A harness says how many slots one of its cases takes (`slots`, default 1; a
browser case may take 2); the runner leases only what fits in its free slots, and a case
given to it that needs more than is free waits for them, first come first served.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import deque
from collections.abc import AsyncIterator, Callable

import click

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


class Slots:
    """`total` slots shared by running cases; a case needing more than are free waits.

    `free()` is what the runner may lease for: 0 while a case waits, so that small cases
    leased meanwhile cannot keep a big one waiting for ever.
    """

    def __init__(self, total: int) -> None:
        if total < 1:
            raise ValueError("a runner has at least one slot")
        self.total = total
        self.used = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    def need(self, slots: int | None) -> int:
        """The slots a case takes here: its harness's, at least 1, at most all of them
        (a case needing more than the machine has runs alone rather than never)."""
        return min(max(slots or 1, 1), self.total)

    def free(self) -> int:
        return 0 if self._waiting else self.total - self.used

    def fits(self, slots: int | None) -> bool:
        return self.need(slots) <= self.free()

    def take(self, slots: int | None) -> int:
        """Take the slots of a case that fits now; returns how many were taken."""
        n = self.need(slots)
        if n > self.free():
            raise ValueError(f"{n} slot(s) asked, {self.free()} free")
        self.used += n
        return n

    def give(self, n: int) -> None:
        """Give back `n` slots taken earlier; waiting cases that now fit take theirs."""
        if not 0 < n <= self.used:
            raise ValueError(f"{n} slot(s) given back, {self.used} taken")
        self.used -= n
        self._wake()

    async def acquire(self, slots: int | None) -> int:
        """Take the slots of a case, waiting for them in turn; returns how many were taken."""
        n = self.need(slots)
        if not self._waiting and self.used + n <= self.total:
            self.used += n
            return n
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((n, future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.give(n)  # granted as it was cancelled: hand them on
            else:
                with contextlib.suppress(ValueError):  # already dropped by _wake
                    self._waiting.remove((n, future))
                self._wake()
            raise
        return n

    @contextlib.asynccontextmanager
    async def held(self, slots: int | None) -> AsyncIterator[int]:
        n = await self.acquire(slots)
        try:
            yield n
        finally:
            self.give(n)

    def _wake(self) -> None:
        while self._waiting and self.used + self._waiting[0][0] <= self.total:
            n, future = self._waiting.popleft()
            if not future.done():
                self.used += n
                future.set_result(None)
