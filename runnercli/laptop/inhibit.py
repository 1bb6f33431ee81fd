"""Keeping the machine awake while cases run: a sleep inhibitor held from the first case
to the end of the last.

On Linux, `systemd-inhibit --what=sleep:idle --mode=block` runs `cat` on a pipe from the
runner: the lock lasts as long as that `cat`, which ends when the pipe closes — when the
runner releases it, and also when the runner dies, however it dies (a `kill -9` included),
since the kernel closes the runner's end of the pipe. On macOS, `caffeinate -i -w <pid>`
ends by itself when the runner's pid does.

Where no inhibitor can be had — no such program, or one that exits at once (no system bus,
as in most containers, or a policy refusing the lock) — the runner says so once and goes on:
a sleep that happens anyway is still resumed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from enum import StrEnum

from runnercli.tasks import cancel_and_wait

WHO = "everdict-runner"
WHY = "running evaluation cases"
# How long a released inhibitor gets to leave before it is killed.
STOP_TIMEOUT_S = 2.0


class Held(StrEnum):
    HELD = "held"
    RELEASED = "released"
    OFF = "off"
    UNAVAILABLE = "unavailable"


@dataclass(frozen=True)
class InhibitorStatus:
    """What `status` shows: `held`, `released`, `off`, or `unavailable (why)`."""

    state: Held
    why: str = ""

    def __str__(self) -> str:
        return f"{self.state} ({self.why})" if self.why else str(self.state)


def inhibitor_command(platform: str, pid: int, path: str | None = None) -> list[str] | None:
    """The command that holds the lock on `platform` for process `pid`; None if none is found."""
    if platform.startswith("linux"):
        program = shutil.which("systemd-inhibit", path=path)
        if not program:
            return None
        cat = shutil.which("cat", path=path) or "cat"
        return [
            program,
            "--what=sleep:idle",
            f"--who={WHO}",
            f"--why={WHY}",
            "--mode=block",
            cat,
        ]
    if platform == "darwin":
        program = shutil.which("caffeinate", path=path)
        return [program, "-i", "-w", str(pid)] if program else None
    return None


class Inhibitor:
    """Holds a sleep inhibitor while its count of running cases is above zero.

    `hold()` when a case starts, `release()` when it ends (or `async with held()`); the
    inhibitor starts on 0 → 1 and stops on 1 → 0. `say` gets the one message about an
    inhibitor that cannot be had, `on_change` every new status.
    """

    def __init__(
        self,
        *,
        allow_sleep: bool = False,
        platform: str | None = None,
        path: str | None = None,
        pid: int | None = None,
        say: Callable[[str], None] = lambda _: None,
        on_change: Callable[[InhibitorStatus], None] = lambda _: None,
    ) -> None:
        self.platform = platform or sys.platform
        self.path = path
        self.pid = pid or os.getpid()
        self.say = say
        self.on_change = on_change
        self.count = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._watch: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._status = InhibitorStatus(Held.OFF if allow_sleep else Held.RELEASED)
        self.allow_sleep = allow_sleep

    @property
    def status(self) -> InhibitorStatus:
        return self._status

    def _set(self, status: InhibitorStatus) -> None:
        if status != self._status:
            self._status = status
            self.on_change(status)

    async def hold(self) -> None:
        """One more case runs: start the inhibitor if it is the first."""
        self.count += 1
        if self.count == 1:
            async with self._lock:
                if self.count > 0 and self._proc is None:
                    await self._start()

    async def release(self) -> None:
        """One case fewer: stop the inhibitor if it was the last."""
        self.count = max(0, self.count - 1)
        if self.count == 0:
            async with self._lock:
                if self.count == 0:
                    await self._stop()

    async def close(self) -> None:
        """Stop the inhibitor whatever the count (the runner is leaving)."""
        self.count = 0
        async with self._lock:
            await self._stop()

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        await self.hold()
        try:
            yield
        finally:
            await self.release()

    async def _start(self) -> None:
        if self._status.state in (Held.OFF, Held.UNAVAILABLE):
            return
        argv = inhibitor_command(self.platform, self.pid, self.path)
        if argv is None:
            self._unavailable(self._missing())
            return
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                # Out of the terminal's process group: the Ctrl-C that starts a drain must
                # not end the lock while the cases are still finishing.
                start_new_session=True,
            )
        except OSError as exc:
            self._unavailable(f"{argv[0]}: {exc.strerror}")
            return
        self._proc = proc
        self._watch = asyncio.create_task(self._watch_exit(proc), name="inhibitor")
        self._set(InhibitorStatus(Held.HELD))

    def _missing(self) -> str:
        if self.platform.startswith("linux"):
            return "no systemd-inhibit on PATH"
        if self.platform == "darwin":
            return "no caffeinate on PATH"
        return f"no sleep inhibitor on {self.platform}"

    async def _watch_exit(self, proc: asyncio.subprocess.Process) -> None:
        """An inhibitor that ends while it should hold could not take the lock."""
        assert proc.stderr is not None
        err = (await proc.stderr.read()).decode(errors="replace").strip()
        code = await proc.wait()
        if self._proc is proc:
            self._proc = None
            lines = err.splitlines()
            self._unavailable(lines[-1] if lines else f"the inhibitor exited with status {code}")

    def _unavailable(self, why: str) -> None:
        self.say(f"cannot keep this machine awake while cases run: {why}")
        self._set(InhibitorStatus(Held.UNAVAILABLE, why))

    async def _stop(self) -> None:
        proc, watch = self._proc, self._watch
        self._proc = self._watch = None
        if proc is not None:
            await _end(proc)
        if watch is not None:
            await cancel_and_wait(watch)
        if self._status.state == Held.HELD:
            self._set(InhibitorStatus(Held.RELEASED))


async def _end(proc: asyncio.subprocess.Process) -> None:
    """Close the inhibitor's pipe (its `cat` ends) and make sure it is gone."""
    if proc.stdin is not None:
        proc.stdin.close()
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        # Not `wait_for`: on Python 3.11 it returns the result, and drops a cancellation of
        # the caller, when the process ends as the cancellation comes.
        async with asyncio.timeout(STOP_TIMEOUT_S):
            await proc.wait()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
