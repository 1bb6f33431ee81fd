"""The page's side of the fs rendezvous on an event loop: the request asked and its answer
read in a thread of the loop's pool, and the wait between them on the loop itself, so a page
waiting for a runner blocks no thread (neither the request's thread for sync code nor one of
the pool, which runners' calls need) while the runner reads its files."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from channels.db import database_sync_to_async

from runners.wakeup import answers
from scorecards.files.services import (
    FsAnswer,
    FsAsked,
    FsWait,
    fs_answer_accepted,
    fs_request_ask,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class LoopEvent:
    """An answer's wake-up for a request awaited on this event loop, set from any thread
    (the answer's commit in a runner's call, or the notification listener)."""

    __slots__ = ("_future", "_loop")

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._future: asyncio.Future[None] = self._loop.create_future()

    def set(self) -> None:
        try:
            self._loop.call_soon_threadsafe(self._settle)
        except RuntimeError:  # its loop has closed: nobody waits any more
            pass

    def _settle(self) -> None:
        if not self._future.done():
            self._future.set_result(None)

    def clear(self) -> None:
        if self._future.done():
            self._future = self._loop.create_future()

    async def wait(self, timeout: float) -> bool:
        """Whether it was set within `timeout` seconds."""
        if not self._future.done():
            await asyncio.wait([self._future], timeout=timeout)
        return self._future.done()


async def fs_request_await(*, request: FsAsked, timeout_s: float | None = None) -> FsAnswer:
    """`fs_request_wait` on an event loop: the runner's answer to `request`, NoAnswer (504)
    when none came in time."""
    wait = FsWait.start(request, timeout_s)
    look = database_sync_to_async(wait.look, thread_sensitive=False)
    with answers.waiting(request.pk, LoopEvent()) as answered:
        while True:
            woken = await answered.wait(wait.next_wait())
            answered.clear()
            answer = wait.handed() or await look(woken=woken)
            if answer is not None:
                return answer


async def fs_answer_aget(
    *, user: User, run_id: int, key: str, op: str, path: str, repeat: str | int | None = None
) -> FsAnswer:
    """`fs_answer_get` on an event loop: what `GET /api/runs/<id>/files` and the MCP tools
    await."""
    ask = database_sync_to_async(fs_request_ask, thread_sensitive=False)
    request = await ask(user=user, run_id=run_id, key=key, op=op, path=path, repeat=repeat)
    return fs_answer_accepted(await fs_request_await(request=request))
