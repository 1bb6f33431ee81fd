"""The harness's process: started in a group of its own, so a timeout or a kill ends
everything it started, and watched for its exit without waiting on its pipes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable
from typing import Any

from runnercli.case.argv import StartError
from runnercli.case.pipeline import EndStatus
from runnercli.tasks import within

# Time a process group gets between SIGTERM and SIGKILL when its timeout passes.
TERM_GRACE_S = 2.0
# Time the pipes get to drain once the group is gone (a daemon that escaped the group can
# hold them open forever).
DRAIN_S = 2.0
READ_CHUNK = 64 * 1024
EXIT_POLL_S = 0.02
# Windows has no SIGKILL; there `signal_group` ends the process with TerminateProcess anyway.
KILL = getattr(signal, "SIGKILL", signal.SIGTERM)


def _group_options() -> dict[str, Any]:
    if sys.platform == "win32":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


def signal_group(proc: asyncio.subprocess.Process, sig: int) -> None:
    """Send `sig` to the case's whole process group (its leader may already be gone)."""
    if sys.platform == "win32":
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        return
    # start_new_session made the child a session and group leader: its pid is the group id.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def watch_children_by_pidfd() -> bool:
    """On Linux with Python 3.11, have the event loop learn of a case's exit from a pidfd it
    polls, rather than from a thread started per case to wait for it (Python 3.11's default;
    3.12 picks the pidfd watcher itself). Call once, in the loop the cases run in, before any
    case starts; return whether the pidfd watcher is in use."""
    if sys.version_info >= (3, 12) or not hasattr(os, "pidfd_open"):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:  # a kernel before 5.3, or a sandbox refusing it
        return False
    watcher = asyncio.PidfdChildWatcher()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        asyncio.set_child_watcher(watcher)
    watcher.attach_loop(asyncio.get_running_loop())
    return True


class _CaseProtocol(asyncio.subprocess.SubprocessStreamProtocol):
    """The streams of `create_subprocess_exec`, and an event set the moment the leader exits
    (the loop's child watcher tells the transport), whether or not its pipes are closed."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited = asyncio.Event()

    def process_exited(self) -> None:
        super().process_exited()
        self.exited.set()


async def _exited(proc: asyncio.subprocess.Process) -> int:
    """Wait for the leader to exit.

    Not `proc.wait()`: on Python 3.11 it also waits for the pipes to close, which a
    grandchild holding stderr can put off for as long as it lives.
    """
    protocol = getattr(proc, "_protocol", None)
    if isinstance(protocol, _CaseProtocol):
        await protocol.exited.wait()
    while proc.returncode is None:
        await asyncio.sleep(EXIT_POLL_S)
    return proc.returncode


async def _end_group(proc: asyncio.subprocess.Process, grace_s: float) -> None:
    if grace_s > 0:
        signal_group(proc, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await within(_exited(proc), grace_s)
    signal_group(proc, KILL)
    await _exited(proc)


async def reap(proc: asyncio.subprocess.Process, timeout_s: float = DRAIN_S) -> None:
    """Wait a little for a killed leader to be gone (no zombie left behind)."""
    with contextlib.suppress(TimeoutError):
        await within(_exited(proc), timeout_s)


async def spawn(argv: list[str], env: dict[str, str], workdir: str) -> asyncio.subprocess.Process:
    """`asyncio.create_subprocess_exec`, with a protocol that says when the leader exits;
    raise StartError when the program cannot be started."""
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.subprocess_exec(
            lambda: _CaseProtocol(limit=READ_CHUNK, loop=loop),
            *argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=workdir,
            env=env,
            **_group_options(),
        )
        return asyncio.subprocess.Process(transport, protocol, loop)
    except FileNotFoundError as exc:
        raise StartError(f"program not found: {argv[0]}") from exc
    except PermissionError as exc:
        raise StartError(f"program is not executable: {argv[0]}") from exc
    except OSError as exc:
        raise StartError(f"cannot start {argv[0]}: {exc.strerror or exc}") from exc


async def supervise(
    proc: asyncio.subprocess.Process,
    timeout_s: float,
    kill: asyncio.Event,
    term_grace_s: float,
    *,
    stop: asyncio.Event | None = None,
) -> EndStatus:
    """Wait for the leader to exit, the timeout to pass (SIGTERM, then SIGKILL after the
    grace) or `kill` to be set (SIGKILL at once); say which. `stop` set (a budget spent)
    ends the group as a timeout does, and the run counts as completed."""
    exited = asyncio.create_task(_exited(proc))
    killed = asyncio.create_task(kill.wait())
    stopped = asyncio.create_task(stop.wait()) if stop is not None else None
    waited = {exited, killed} | ({stopped} if stopped is not None else set())
    try:
        done, _ = await asyncio.wait(waited, timeout=timeout_s, return_when="FIRST_COMPLETED")
    finally:
        for task in waited:
            task.cancel()
    if exited in done:
        return "completed"
    if stopped is not None and stopped in done and killed not in done:
        await _end_group(proc, grace_s=term_grace_s)
        return "completed"
    if killed in done:
        await _end_group(proc, grace_s=0)
        return "canceled"
    await _end_group(proc, grace_s=term_grace_s)
    return "timeout"


async def pump(stream: asyncio.StreamReader | None, feed: Callable[[bytes], None]) -> None:
    if stream is None:
        return
    while chunk := await stream.read(READ_CHUNK):
        feed(chunk)


async def drain(readers: list[asyncio.Task[None]]) -> None:
    """Let the pipes empty; those held open past DRAIN_S (by a daemon that escaped the
    group) are given up."""
    _, stuck = await asyncio.wait(readers, timeout=DRAIN_S)
    for reader in stuck:
        reader.cancel()
