"""Starting, waiting for and stopping child processes (everdict/processes.py)."""

from __future__ import annotations

import signal
import socket
import sys
import time
from pathlib import Path

import psutil
import pytest

from everdict.processes import (
    ProcessExited,
    check_port_free,
    free_port,
    spawn,
    wait_http,
)

# A parent that starts a child in its own process group, prints the child's pid, and sleeps.
PARENT_AND_CHILD = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(60)\n"
)


def _child_pid(log: Path) -> int:
    for _ in range(100):
        text = log.read_text().strip()
        if text:
            return int(text)
        time.sleep(0.05)
    raise AssertionError("the parent never printed its child's pid")


def test_stop_ends_the_process_and_what_it_started_in_its_group(tmp_path: Path) -> None:
    proc = spawn([sys.executable, "-c", PARENT_AND_CHILD], tmp_path / "parent.log")
    child = psutil.Process(_child_pid(proc.log))

    code = proc.stop()

    assert code == -signal.SIGTERM
    child.wait(5)
    assert not child.is_running()


def test_stop_kills_a_process_that_ignores_the_signal_after_the_grace(tmp_path: Path) -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    proc = spawn([sys.executable, "-c", stubborn], tmp_path / "stubborn.log")
    time.sleep(0.5)  # let it ignore SIGTERM first

    assert proc.stop(grace_s=0.5) == -signal.SIGKILL


def test_wait_http_gives_up_at_once_when_the_server_exits(tmp_path: Path) -> None:
    proc = spawn(
        [sys.executable, "-c", "import sys; print('cannot start'); sys.exit(4)"],
        tmp_path / "server.log",
    )

    with pytest.raises(ProcessExited) as caught:
        wait_http(f"http://127.0.0.1:{free_port()}/", timeout_s=30, watch=[proc])

    assert "server exited with code 4" in str(caught.value)
    assert "cannot start" in str(caught.value)


def test_wait_http_times_out_when_nothing_answers() -> None:
    with pytest.raises(TimeoutError):
        wait_http(f"http://127.0.0.1:{free_port()}/", timeout_s=0.3)


def test_check_port_free_refuses_a_port_with_a_listener() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            check_port_free(taken.getsockname()[1])
    check_port_free(free_port())
