"""Ending the runner's own asyncio tasks."""

from __future__ import annotations

import asyncio
from typing import Any


async def cancel_and_wait(task: asyncio.Task[Any]) -> None:
    """Cancel `task` and wait until it has ended, whatever it raised.

    A cancellation of the caller meanwhile still ends the caller: `suppress(CancelledError)`
    around `await task` cannot tell the task's own from the caller's, and swallows both.
    """
    task.cancel()
    await asyncio.wait([task])
