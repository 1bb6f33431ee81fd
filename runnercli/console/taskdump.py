"""What the runner is waiting on: `kill -USR1 PID` writes to its log (stderr) the stack of
each of its threads at once, from the signal handler itself (`faulthandler`, so a blocked
event loop shows where it is blocked), then, from the loop, each asyncio task's await chain,
outermost call first, and the task it waits on when it waits on one. The runner goes on: one
that will not stop, or sits idle with work waiting, says where it stands without being
stopped.

Asyncio's own `Task.print_stack` shows a suspended task's outermost frame only; the chain
is followed here through each coroutine's `cr_await`.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import io
import signal
import sys
from collections.abc import Iterator
from types import FrameType
from typing import Any, TextIO

DUMP_SIGNAL = getattr(signal, "SIGUSR1", None)


def await_chain(task: asyncio.Task[Any]) -> list[FrameType]:
    """The frames of `task`'s suspended coroutines, outermost first."""
    frames: list[FrameType] = []
    awaited: Any = task.get_coro()
    while awaited is not None:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
        if frame is not None:
            frames.append(frame)
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
    return frames


def dump_tasks(out: TextIO) -> None:
    """Write every task of the running loop, as above."""
    tasks = sorted(
        (task for task in asyncio.all_tasks() if not task.done()), key=lambda task: task.get_name()
    )
    lines = [f"— what this runner waits on: {len(tasks)} task(s) —"]
    for task in tasks:
        lines.append(f"task {task.get_name()}:")
        lines += [f"  {_where(frame)}" for frame in await_chain(task)]
        # What asyncio itself records the task as waiting on: named when it is a task.
        if isinstance(waited := getattr(task, "_fut_waiter", None), asyncio.Task):
            lines.append(f"  waiting for task {waited.get_name()}")
    lines.append("— end —")
    out.write("\n".join(lines) + "\n")
    out.flush()


@contextlib.contextmanager
def dumping_tasks_on_signal(out: TextIO | None = None) -> Iterator[None]:
    """While inside (in the running loop), DUMP_SIGNAL writes the threads' stacks to stderr
    and `dump_tasks` to `out` (stderr by default)."""
    loop = asyncio.get_running_loop()
    if DUMP_SIGNAL is None:
        yield
        return
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(DUMP_SIGNAL, lambda: dump_tasks(out or sys.stderr))
    # Registered after the loop's handler, which it then calls (`chain`).
    threads = _register_thread_dump(DUMP_SIGNAL)
    try:
        yield
    finally:
        if threads:
            faulthandler.unregister(DUMP_SIGNAL)
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(DUMP_SIGNAL)


def _register_thread_dump(sig: int) -> bool:
    try:
        faulthandler.register(sig, file=sys.stderr, all_threads=True, chain=True)
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        return False  # no file descriptor behind stderr (captured), or no such call here
    return True


def _where(frame: FrameType) -> str:
    module = frame.f_globals.get("__name__", frame.f_code.co_filename)
    return f"{frame.f_code.co_qualname} ({module}:{frame.f_lineno})"
