"""The runner's pidfile and `drain`: stale pidfiles are recognised, a live runner is asked to
drain with SIGTERM and, with --wait, waited for. The runners here are real child processes
holding the pidfile as `run` does, recording the signal they get."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from runnercli.commands.drain import drain
from runnercli.laptop.pidfile import (
    AlreadyRunning,
    Pidfile,
    ProcessId,
    pidfile_path,
    process_start,
    read_pidfile,
    running_runner,
    this_process,
)

# A stand-in for `run`: it holds the pidfile of the config in argv[1], records the signal
# it gets in argv[2] and leaves on it ("exit") or carries on ("stay").
RUNNER = textwrap.dedent(
    """
    import pathlib, signal, sys, time
    from runnercli.laptop.pidfile import Pidfile, pidfile_path

    config, record, mode = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), sys.argv[3]

    def on_term(signum, frame):
        record.write_text(signal.Signals(signum).name)
        if mode == "exit":
            raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    with Pidfile(pidfile_path(config)):
        print("ready", flush=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.05)
    """
)


def start_runner(tmp_path: Path, mode: str) -> subprocess.Popen[str]:
    config = tmp_path / "runner.json"
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(config), str(tmp_path / "signal.txt"), mode],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_pidfile_names_this_process_with_its_start_and_goes_at_release(tmp_path: Path) -> None:
    path = pidfile_path(tmp_path / "runner.json")
    assert path == tmp_path / "runner.pid"
    with Pidfile(path):
        written = json.loads(path.read_text())
        assert written["pid"] == os.getpid()
        assert read_pidfile(path) == this_process()
        assert running_runner(tmp_path / "runner.json") == this_process()
    assert not path.exists()


def test_a_pidfile_of_a_dead_process_is_stale_and_replaced(
    tmp_path: Path, sleeper: subprocess.Popen[bytes]
) -> None:
    started = process_start(sleeper.pid)
    assert started
    path = tmp_path / "runner.pid"
    path.write_text(json.dumps({"pid": sleeper.pid, "started": started}))
    assert running_runner(tmp_path / "runner.json") == ProcessId(sleeper.pid, started)
    sleeper.kill()
    sleeper.wait()
    assert running_runner(tmp_path / "runner.json") is None
    with Pidfile(path):
        assert read_pidfile(path) == this_process()


def test_a_pid_given_to_another_program_is_not_the_runner(tmp_path: Path) -> None:
    # The pid lives (it is this test), but it started at another time than the pidfile says.
    path = tmp_path / "runner.pid"
    path.write_text(json.dumps({"pid": os.getpid(), "started": "an earlier boot:123"}))
    assert running_runner(tmp_path / "runner.json") is None
    done = CliRunner().invoke(drain, ["--config", str(tmp_path / "runner.json")])
    assert done.exit_code == 1
    assert done.output == f"no runner is running for {tmp_path / 'runner.json'}\n"


def test_a_zombie_is_not_running(sleeper: subprocess.Popen[bytes]) -> None:
    sleeper.kill()
    deadline = time.monotonic() + 5
    while process_start(sleeper.pid) is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert process_start(sleeper.pid) is None  # killed, not yet reaped
    assert sleeper.poll() is not None


def test_a_second_runner_on_the_same_config_is_refused(tmp_path: Path) -> None:
    runner = start_runner(tmp_path, "exit")
    try:
        with pytest.raises(AlreadyRunning) as refused:
            Pidfile(tmp_path / "runner.pid").acquire()
        assert refused.value.holder.pid == runner.pid
    finally:
        runner.kill()
        runner.wait()


def test_drain_sends_sigterm_to_the_runner_and_waits_until_it_has_exited(tmp_path: Path) -> None:
    runner = start_runner(tmp_path, "exit")
    config = tmp_path / "runner.json"
    done = CliRunner().invoke(drain, ["--wait", "--timeout", "30", "--config", str(config)])
    assert done.exit_code == 0, done.output
    assert f"✓ asked the runner (pid {runner.pid}) to drain" in done.output
    assert f"✓ the runner (pid {runner.pid}) has exited" in done.output
    assert (tmp_path / "signal.txt").read_text() == "SIGTERM"
    assert runner.wait(timeout=5) == 0
    assert not (tmp_path / "runner.pid").exists()


def test_drain_without_wait_only_asks(tmp_path: Path) -> None:
    runner = start_runner(tmp_path, "exit")
    done = CliRunner().invoke(drain, ["--config", str(tmp_path / "runner.json")])
    assert done.exit_code == 0, done.output
    assert "has exited" not in done.output
    assert runner.wait(timeout=10) == 0
    assert (tmp_path / "signal.txt").read_text() == "SIGTERM"


def test_drain_says_when_the_runner_is_still_finishing_its_cases(tmp_path: Path) -> None:
    runner = start_runner(tmp_path, "stay")
    try:
        config = tmp_path / "runner.json"
        done = CliRunner().invoke(drain, ["--wait", "--timeout", "0.5", "--config", str(config)])
        assert done.exit_code == 1
        assert f"the runner (pid {runner.pid}) is still finishing its cases after 0.5s" in (
            done.output
        )
        assert (tmp_path / "signal.txt").read_text() == "SIGTERM"
        assert runner.poll() is None
    finally:
        runner.kill()
        runner.wait()


def test_drain_without_a_runner_says_so(tmp_path: Path) -> None:
    done = CliRunner().invoke(drain, ["--config", str(tmp_path / "runner.json")])
    assert done.exit_code == 1
    assert "no runner is running for" in done.output
