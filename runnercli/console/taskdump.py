"""What the runner is waiting on: `kill -USR1 PID` writes each of its tasks' await chain to
its log (stderr), outermost call first, and the task it waits on when it waits on one,
beside the threads at work (not the thread pool's idle workers). A runner that will not
stop, or sits idle with work waiting, says where it stands without being stopped.

Asyncio's own `Task.print_stack` shows a suspended task's outermost frame only; the chain
is followed here through each coroutine's `cr_await`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any, TextIO

DUMP_SIGNAL = getattr(signal, "SIGUSR1", None)
# The innermost frames shown of a thread that is not the event loop's.
THREAD_FRAMES = 6


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
    """Write every task of the running loop and every other thread, as above."""
    tasks = sorted(asyncio.all_tasks(), key=lambda task: task.get_name())
    lines = [f"— what this runner waits on: {len(tasks)} task(s) —"]
    for task in tasks:
        if task.done():
            continue
        lines.append(f"task {task.get_name()}:")
        lines += [f"  {_where(frame)}" for frame in await_chain(task)]
        # What asyncio itself records the task as waiting on: named when it is a task.
        if isinstance(waited := getattr(task, "_fut_waiter", None), asyncio.Task):
            lines.append(f"  waiting for task {waited.get_name()}")
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident() or _idle_worker(frame):
            continue
        lines.append(f"thread {names.get(ident, ident)}:")
        lines += [f"  {_where(frame)}" for frame in _outward(frame)[:THREAD_FRAMES][::-1]]
    lines.append("— end —")
    out.write("\n".join(lines) + "\n")
    out.flush()


@contextlib.contextmanager
def dumping_tasks_on_signal(out: TextIO | None = None) -> Iterator[None]:
    """While inside (in the running loop), DUMP_SIGNAL writes `dump_tasks` to `out`."""
    loop = asyncio.get_running_loop()
    if DUMP_SIGNAL is None:
        yield
        return
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(DUMP_SIGNAL, lambda: dump_tasks(out or sys.stderr))
    try:
        yield
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(DUMP_SIGNAL)


def _where(frame: FrameType) -> str:
    module = frame.f_globals.get("__name__", frame.f_code.co_filename)
    return f"{frame.f_code.co_qualname} ({module}:{frame.f_lineno})"


def _outward(frame: FrameType | None) -> list[FrameType]:
    """A thread's frames, innermost first."""
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def _idle_worker(frame: FrameType) -> bool:
    """A thread pool's worker waiting for work (asyncio's `to_thread` keeps a few)."""
    return any(
        f.f_code.co_name == "_worker" and "futures" in f.f_code.co_filename
        for f in _outward(frame)[:3]
    )
