"""Waiting on, and ending, the runner's own asyncio tasks.

On Python 3.11, `asyncio.wait_for` can return its result, dropping a cancellation of the
caller, when the awaited thing finishes in the same turn as the cancellation comes; and
`suppress(CancelledError)` around `await task` cannot tell the task's own cancellation from
the caller's, and swallows both. A task whose cancellation is swallowed runs on, and whoever
cancelled it waits for it forever. The functions here are the ways the runner waits instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait until `event` is set or `timeout_s` passes: whether it was set."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        return event.is_set()
    return True


async def ended(task: asyncio.Task[T]) -> T | None:
    """Wait until `task` has ended: its result, or its error raised here, as `await task`
    would give them, but its own cancellation absorbed (None).

    A cancellation of the caller meanwhile ends the caller and leaves `task` running.
    """
    await asyncio.wait([task])
    if task.cancelled():
        return None
    return task.result()


async def cancel_and_wait(task: asyncio.Task[T]) -> T | None:
    """Cancel `task` and wait until it has ended (`ended`)."""
    task.cancel()
    return await ended(task)


async def within(awaitable: Awaitable[T], timeout_s: float) -> T:
    """`await awaitable`, or TimeoutError once `timeout_s` passes (`asyncio.wait_for`
    without its swallowing of the caller's cancellation)."""
    async with asyncio.timeout(timeout_s):
        return await awaitable
