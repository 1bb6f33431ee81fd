"""Threads for Django's sync code kept from one request to the next, as a WSGI server keeps
its threads.

Under ASGI, Django runs a request's sync code (its views, DRF, the ORM) on one thread of
the request's own (asgiref's `ThreadSensitiveContext`): a new thread started for each
request, and another started at its end to join the first. Those two thread starts were a
measurable part of a short API request. asgiref lets the caller give that context its
executor and keep it after the block; this app does, from a pool of single-thread executors
that requests take and give back. A request still has its thread to itself while it runs.

An executor whose work outlived its request (a view still running for a client that went
away) is not given back: the next request would wait behind it. It is shut down once that
work ends, as asgiref would have.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from asgiref.sync import ThreadSensitiveContext

Scope = dict[str, Any]
App = Callable[[Scope, Any, Any], Any]


class _RequestExecutor(ThreadPoolExecutor):
    """One thread, counting the work submitted that has not finished."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="request")
        self._pending = 0
        self._pending_lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._pending_lock:
            self._pending += 1
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(self._done)
        return future

    def _done(self, _: Future[Any]) -> None:
        with self._pending_lock:
            self._pending -= 1

    @property
    def idle(self) -> bool:
        with self._pending_lock:
            return self._pending == 0


class RequestThreads:
    """ASGI middleware: each HTTP request's sync code on a kept thread of its own."""

    def __init__(self, app: App, *, keep: int = 32) -> None:
        self.app = app
        self.keep = keep  # idle threads kept at most; more are stopped as they come back
        self._idle: list[_RequestExecutor] = []

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        executor = self._idle.pop() if self._idle else _RequestExecutor()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.app(scope, receive, send)
        finally:
            self._give_back(executor)

    def _give_back(self, executor: _RequestExecutor) -> None:
        if executor.idle and len(self._idle) < self.keep:
            self._idle.append(executor)
        else:
            # Its thread ends once the work it still has (if any) is done.
            executor.shutdown(wait=False)
