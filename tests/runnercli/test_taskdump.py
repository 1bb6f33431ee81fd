"""`runnercli.console.taskdump`: SIGUSR1 writes each task's await chain, outermost call
first, and what a task waits on when that is another task; and every thread's stack at
once, so that a blocked event loop shows where it is blocked."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import subprocess
import sys
import time

import pytest

from runnercli.console.taskdump import DUMP_SIGNAL, await_chain, dump_tasks, dumping_tasks_on_signal


async def _inner(event: asyncio.Event) -> None:
    await event.wait()


async def _outer(event: asyncio.Event) -> None:
    await _inner(event)


async def _awaiting(task: asyncio.Task[None]) -> None:
    await task


def test_the_dump_follows_each_await_chain_and_names_the_task_awaited() -> None:
    out = io.StringIO()

    async def main() -> None:
        event = asyncio.Event()
        deep = asyncio.create_task(_outer(event), name="deep")
        waiter = asyncio.create_task(_awaiting(deep), name="waiter")
        await asyncio.sleep(0.05)
        frames = await_chain(deep)
        assert [frame.f_code.co_name for frame in frames][:2] == ["_outer", "_inner"]
        dump_tasks(out)
        event.set()
        await asyncio.gather(deep, waiter)

    asyncio.run(main())
    text = out.getvalue()
    deep_part = text[text.index("task deep:") :].split("task ", 2)[1]
    assert deep_part.index("_outer") < deep_part.index("_inner") < deep_part.index("Event.wait")
    assert "task waiter:" in text and "waiting for task deep" in text
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


# The loop is blocked by a call that never yields; the signal comes meanwhile.
BLOCKED = """
import asyncio, sys, time
from runnercli.console.taskdump import dumping_tasks_on_signal

def blocking_call():
    print("blocked", flush=True)
    time.sleep(3)

async def main():
    with dumping_tasks_on_signal():
        blocking_call()
        await asyncio.sleep(0.2)

asyncio.run(main())
"""


@pytest.mark.skipif(DUMP_SIGNAL is None, reason="no SIGUSR1 here")
def test_a_blocked_loop_still_shows_where_it_is_blocked_and_its_tasks_once_it_runs() -> None:
    assert DUMP_SIGNAL is not None
    child = subprocess.Popen(
        [sys.executable, "-c", BLOCKED],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline() == "blocked\n"
    time.sleep(0.2)
    child.send_signal(DUMP_SIGNAL)
    _, err = child.communicate(timeout=30)
    assert child.returncode == 0, err
    # At once, from the handler: the main thread inside the call that blocks the loop.
    threads = err[: err.index("— what this runner waits on")]
    assert "blocking_call" in threads and "File " in threads, err
    # Then, when the loop runs again: its task.
    assert "main (__main__:" in err[err.index("— what this runner waits on") :], err
