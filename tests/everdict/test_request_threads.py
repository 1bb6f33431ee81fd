"""Each HTTP request's sync code runs on a thread of its own, kept for later requests: not
shared by two requests at once, and not given back while a request's work still runs."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from asgiref.sync import sync_to_async

from core.request_threads import RequestThreads

local = threading.local()


def served_on_this_thread() -> tuple[int, int]:
    """(this thread's ident, how many requests this thread has served so far)."""
    local.served = getattr(local, "served", 0) + 1
    return threading.get_ident(), local.served


def app_recording(seen: list[tuple[int, int]], *, wait: threading.Event | None = None) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        def work() -> tuple[int, int]:
            if wait is not None:
                assert wait.wait(10)
            return served_on_this_thread()

        seen.append(await sync_to_async(work)())

    return app


def request(app: Any) -> Any:
    return app({"type": "http"}, None, None)


def test_requests_one_after_another_are_served_on_one_kept_thread() -> None:
    seen: list[tuple[int, int]] = []
    app = RequestThreads(app_recording(seen))

    async def main() -> None:
        for _ in range(5):
            await request(app)

    asyncio.run(main())
    assert len({ident for ident, _ in seen}) == 1
    assert [served for _, served in seen] == [1, 2, 3, 4, 5]
    assert threading.get_ident() not in {ident for ident, _ in seen}


def test_requests_at_once_each_have_a_thread_of_their_own() -> None:
    seen: list[tuple[int, int]] = []
    both = threading.Barrier(2, timeout=10)  # each waits for the other: one thread would hang

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        def work() -> tuple[int, int]:
            both.wait()
            return served_on_this_thread()

        seen.append(await sync_to_async(work)())

    threads = RequestThreads(app)

    async def main() -> None:
        await asyncio.gather(request(threads), request(threads))
        await asyncio.gather(request(threads), request(threads))

    asyncio.run(main())
    assert len({ident for ident, _ in seen[:2]}) == 2
    assert {ident for ident, _ in seen[2:]} == {ident for ident, _ in seen[:2]}  # kept


def test_a_thread_still_running_a_canceled_request_is_not_given_to_the_next() -> None:
    seen: list[tuple[int, int]] = []
    release = threading.Event()
    stuck = RequestThreads(app_recording(seen, wait=release))

    async def main() -> None:
        abandoned = asyncio.create_task(request(stuck))
        await asyncio.sleep(0.2)  # its sync work is running, blocked
        abandoned.cancel()  # the client went away
        await asyncio.gather(abandoned, return_exceptions=True)
        assert not stuck._idle  # not given back while its work runs
        # The next request gets a thread of its own at once, not a place behind it.
        quick = threading.Event()
        quick.set()
        stuck.app = app_recording(seen, wait=quick)
        await asyncio.wait_for(request(stuck), timeout=5)

    try:
        asyncio.run(main())
    finally:
        release.set()
    assert len(seen) == 1 and seen[0][1] == 1  # served by a new thread
