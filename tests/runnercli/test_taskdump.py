"""`runnercli.console.taskdump`: SIGUSR1 writes each task's await chain, outermost call
first, what a task waits on when that is another task, and the threads at work — not the
thread pool's idle workers."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import threading

import pytest

from runnercli.console.taskdump import DUMP_SIGNAL, await_chain, dump_tasks, dumping_tasks_on_signal


async def _inner(event: asyncio.Event) -> None:
    await event.wait()


async def _outer(event: asyncio.Event) -> None:
    await _inner(event)


def _blocked_in_thread(release: threading.Event) -> None:
    release.wait(30)


async def _awaiting(task: asyncio.Task[None]) -> None:
    await task


def test_the_dump_follows_each_await_chain_and_shows_the_busy_threads() -> None:
    out = io.StringIO()

    async def main() -> None:
        event, release = asyncio.Event(), threading.Event()
        deep = asyncio.create_task(_outer(event), name="deep")
        waiter = asyncio.create_task(_awaiting(deep), name="waiter")
        worker = asyncio.create_task(asyncio.to_thread(_blocked_in_thread, release))
        # An idle worker of the pool, beside the busy one.
        await asyncio.to_thread(lambda: None)
        await asyncio.sleep(0.05)
        frames = await_chain(deep)
        assert [frame.f_code.co_name for frame in frames][:2] == ["_outer", "_inner"]
        dump_tasks(out)
        release.set()
        event.set()
        await asyncio.gather(deep, waiter, worker)

    asyncio.run(main())
    text = out.getvalue()
    deep_part = text[text.index("task deep:") :].split("task ", 2)[1]
    assert deep_part.index("_outer") < deep_part.index("_inner") < deep_part.index("Event.wait")
    assert "task waiter:" in text and "waiting for task deep" in text
    threads = text[text.index("\nthread ") :]
    assert "_blocked_in_thread (tests.runnercli.test_taskdump:" in threads
    assert threads.count("\nthread ") == 1, threads  # the idle worker is left out
    assert text.startswith("— what this runner waits on:") and text.endswith("— end —\n")


@pytest.mark.skipif(DUMP_SIGNAL is None, reason="no SIGUSR1 here")
def test_the_signal_writes_the_dump_while_inside_and_nothing_after() -> None:
    assert DUMP_SIGNAL is not None
    out = io.StringIO()

    async def main() -> None:
        with dumping_tasks_on_signal(out):
            os.kill(os.getpid(), DUMP_SIGNAL)
            await asyncio.sleep(0.1)
        assert signal.getsignal(DUMP_SIGNAL) is signal.SIG_DFL

    asyncio.run(main())
    assert "main (tests.runnercli.test_taskdump:" in out.getvalue()
