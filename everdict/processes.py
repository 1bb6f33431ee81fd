"""Start, wait for and stop child processes: the demo's, the end-to-end tests' and the benchmarks'.

Every process is started leading a process group of its own (a new session), with stdin
from /dev/null and its output in a log file, so that it can be stopped together with
whatever it started, and a failure can be shown with the end of its log. Standard library
only (psutil, when installed, finds descendants that left their group): the demo runs it
before Django is set up, and the benchmarks and tests import it beside their own Django.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

LOOPBACK = "127.0.0.1"
# How long a process that outlasted a stop is given to write what it waits on.
DUMP_WAIT_S = 2.0
# The checkout: `manage.py` is started from here.
PROJECT_DIR = Path(__file__).resolve().parent.parent


class Proc:
    """A child process leading a process group of its own, its output going to `log`."""

    def __init__(
        self, popen: subprocess.Popen[bytes], log: Path, *, dump_signal: int | None = None
    ) -> None:
        self.popen = popen
        self.log = log
        # Sent to the process when it outlasts a stop's grace, before it is killed: one that
        # answers it (the runner: SIGUSR1) writes what it waits on to its log.
        self.dump_signal = dump_signal

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def name(self) -> str:
        return self.log.stem

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, lines: int) -> list[str]:
        return self.output().splitlines()[-lines:]

    def signal_group(self, sig: int) -> None:
        """Send `sig` to the whole group: the process and what it started in its session."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)

    def wait(self, timeout_s: float) -> int | None:
        """The exit code, or None if the process is still running after `timeout_s`."""
        try:
            return self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def stop(self, sig: int = signal.SIGTERM, grace_s: float = 10) -> int | None:
        """Send `sig` to the group, SIGKILL it after `grace_s`; return the exit code."""
        if self.popen.poll() is None:
            self.signal_group(sig)
            if self.wait(grace_s) is None and self.dump_signal is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(self.popen.pid, self.dump_signal)
                self.wait(DUMP_WAIT_S)
            # Also after a clean exit: what the process left running in its group goes too.
            self.signal_group(signal.SIGKILL)
            self.popen.wait(5)
        return self.popen.returncode


class ProcessExited(RuntimeError):
    """A process that was expected to keep running has exited."""

    def __init__(self, proc: Proc, tail_lines: int = 15) -> None:
        self.proc = proc
        super().__init__(
            f"{proc.name} exited with code {proc.popen.returncode}; the end of {proc.log}:\n"
            + "\n".join(f"  {line}" for line in proc.tail(tail_lines))
        )


def spawn(
    args: list[str],
    log: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path = PROJECT_DIR,
    *,
    append: bool = False,
    dump_signal: int | None = None,
) -> Proc:
    """Start `args` in a new session, its stdout and stderr written to `log`.

    `append` keeps what earlier starts wrote to the same log; `dump_signal`: `Proc.stop`.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    # The child has its own copy of the descriptor; the parent's closes at once.
    with log.open("ab" if append else "wb") as handle:
        popen = subprocess.Popen(
            args,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Proc(popen, log, dump_signal=dump_signal)


def check_alive(procs: Iterable[Proc], tail_lines: int = 15) -> None:
    """Raise ProcessExited for the first of `procs` that has exited."""
    for proc in procs:
        if proc.popen.poll() is not None:
            raise ProcessExited(proc, tail_lines)


def wait_http(
    url: str,
    *,
    timeout_s: float = 30,
    watch: Iterable[Proc] = (),
    interval_s: float = 0.1,
    tail_lines: int = 15,
) -> None:
    """Wait until `url` answers (any HTTP status will do).

    Raises ProcessExited as soon as one of the `watch` processes (the server, and what it
    needs) has exited, and TimeoutError after `timeout_s`.
    """
    watched = list(watch)
    deadline = time.monotonic() + timeout_s
    while True:
        check_alive(watched, tail_lines)
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return
        except OSError as exc:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer within {timeout_s:.0f}s") from exc
            time.sleep(interval_s)


def free_port(host: str = LOOPBACK) -> int:
    """A port nothing listens on now (another process may still take it before us)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def check_port_free(port: int, host: str = LOOPBACK) -> None:
    """Raise OSError if something listens on `port`."""
    with socket.socket() as probe:
        # As a server binds: connections of an earlier run lingering in TIME_WAIT do not
        # hold the port, a listener does.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))


def daphne_args(port: int, host: str = LOOPBACK) -> list[str]:
    """The command that serves the project on `host`:`port`, as in production."""
    return [
        *(sys.executable, "-m", "daphne", "-b", host, "-p", str(port)),
        "everdict.asgi:application",
    ]


def descendants() -> list[Any]:
    """This process's descendants (psutil processes), or [] when psutil is not installed."""
    try:
        import psutil
    except ImportError:  # a runtime-only install: process groups are all we have
        return []
    return list(psutil.Process().children(recursive=True))


def kill(strays: Iterable[Any]) -> None:
    """SIGKILL psutil processes, such as one that left its group with a session of its own."""
    for proc in strays:
        with contextlib.suppress(Exception):
            proc.kill()
