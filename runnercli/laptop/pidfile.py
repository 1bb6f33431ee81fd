"""Which runner runs for a config: a pidfile beside it, and `drain`, which asks it to stop.

The pidfile (`runner.json` → `runner.pid`) holds the runner's pid and its start time as the
OS reports it, so a pidfile left by a killed runner, or naming a pid the system has since
given to another program, is recognised as stale rather than signalled. `run` writes it when
it starts (refusing to start while another runner has it) and removes it when it leaves.

Draining is what SIGTERM already does to a runner: it finishes the cases it holds, delivers
their results, leases nothing new and exits 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path

PROC = Path("/proc")


def pidfile_path(config_file: Path) -> Path:
    """The pidfile of the runner whose config file is `config_file`."""
    return config_file.with_name(f"{config_file.stem}.pid")


@dataclass(frozen=True)
class ProcessId:
    """A process as it cannot be confused with a later one given the same pid."""

    pid: int
    started: str

    def alive(self, proc: Path = PROC) -> bool:
        return process_start(self.pid, proc) == self.started


def process_start(pid: int, proc: Path = PROC) -> str | None:
    """When `pid` started, as an opaque token; None when no such process (or a zombie)."""
    if pid <= 0:
        return None
    if (proc / "self" / "stat").exists():
        return _linux_start(pid, proc)
    return _ps_start(pid)


def _linux_start(pid: int, proc: Path) -> str | None:
    try:
        stat = (proc / str(pid) / "stat").read_text()
        boot = (proc / "sys" / "kernel" / "random" / "boot_id").read_text().strip()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from the last ")".
    fields = stat[stat.rindex(")") + 2 :].split()
    state, start_ticks = fields[0], fields[19]
    return None if state in ("Z", "X") else f"{boot}:{start_ticks}"


def _ps_start(pid: int) -> str | None:
    try:
        done = subprocess.run(
            ["ps", "-o", "stat=,lstart=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    state, _, started = done.stdout.strip().partition(" ")
    return None if done.returncode or not started or state.startswith("Z") else started.strip()


def this_process(proc: Path = PROC) -> ProcessId:
    pid = os.getpid()
    return ProcessId(pid, process_start(pid, proc) or "")


def read_pidfile(path: Path) -> ProcessId | None:
    """The process a pidfile names, or None when there is none or it is unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return ProcessId(int(data["pid"]), str(data["started"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


class AlreadyRunning(Exception):
    """Another live runner holds this config's pidfile."""

    def __init__(self, path: Path, holder: ProcessId) -> None:
        super().__init__(f"a runner (pid {holder.pid}) already runs with this config ({path})")
        self.holder = holder


class Pidfile:
    """This process's claim on a config: written on `acquire`, removed on `release`."""

    def __init__(self, path: Path, me: ProcessId | None = None, proc: Path = PROC) -> None:
        self.path = path
        self.proc = proc
        self.me = me or this_process(proc)

    def acquire(self) -> None:
        """Claim the pidfile; a stale one is replaced, a live runner's refused."""
        for _ in range(3):
            if self._create():
                return
            holder = read_pidfile(self.path)
            if holder is not None and holder != self.me and holder.alive(self.proc):
                raise AlreadyRunning(self.path, holder)
            self.path.unlink(missing_ok=True)
        raise OSError(f"cannot claim {self.path}: it keeps reappearing")

    def _create(self) -> bool:
        """Write the pidfile unless one exists: linked into place, so never half-written."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}-", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(asdict(self.me), handle)
            os.link(tmp, self.path)
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)

    def release(self) -> None:
        """Remove the pidfile if it is still this process's."""
        if read_pidfile(self.path) == self.me:
            self.path.unlink(missing_ok=True)

    def __enter__(self) -> Pidfile:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def running_runner(config_file: Path, proc: Path = PROC) -> ProcessId | None:
    """The live runner of `config_file`, if any (a stale pidfile names none)."""
    holder = read_pidfile(pidfile_path(config_file))
    return holder if holder is not None and holder.alive(proc) else None


class Drain(StrEnum):
    NOT_RUNNING = "not running"
    ASKED = "asked"
    EXITED = "exited"
    STILL_RUNNING = "still running"


def drain(
    config_file: Path,
    *,
    wait: bool = False,
    timeout_s: float | None = None,
    echo: Callable[[str], None] = print,
    proc: Path = PROC,
    poll_s: float = 0.2,
) -> Drain:
    """Ask the runner of `config_file` to drain (SIGTERM); with `wait`, wait for it to exit."""
    runner = running_runner(config_file, proc)
    if runner is None:
        echo(f"no runner is running for {config_file}")
        return Drain.NOT_RUNNING
    try:
        os.kill(runner.pid, signal.SIGTERM)
    except ProcessLookupError:
        echo(f"no runner is running for {config_file} (pid {runner.pid} just exited)")
        return Drain.NOT_RUNNING
    echo(
        f"✓ asked the runner (pid {runner.pid}) to drain: it finishes the cases it holds, "
        "delivers their results, takes no new case and exits"
    )
    if not wait:
        return Drain.ASKED
    if _wait_gone(runner, timeout_s, poll_s, proc):
        echo(f"✓ the runner (pid {runner.pid}) has exited")
        return Drain.EXITED
    echo(f"… the runner (pid {runner.pid}) is still finishing its cases after {timeout_s:g}s")
    return Drain.STILL_RUNNING


def _wait_gone(runner: ProcessId, timeout_s: float | None, poll_s: float, proc: Path) -> bool:
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while runner.alive(proc):
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True
