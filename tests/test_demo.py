"""`make demo` end to end: a scored summary from a fresh database, and nothing left on Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.live import ROOT, free_port

# The engine under the server does not change what this shows: one database pass runs it.
pytestmark = [pytest.mark.e2e, pytest.mark.once]

SUMMARY_WITHIN_S = 120


def _read_until(proc: Demo, marker: str, timeout_s: float) -> str:
    """Wait for `marker` in the demo's output (or fail showing what it printed)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        output = proc.output.read_text(errors="replace")
        if marker in output:
            return output
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    pytest.fail(f"no {marker!r} within {timeout_s}s; the demo printed:\n{proc.output.read_text()}")


class Demo(subprocess.Popen[bytes]):
    output: Path


def _path_without(tmp_path: Path, *programs: str) -> str:
    """This PATH, each directory holding one of `programs` replaced by a copy of it (links)
    without them: a machine without those programs."""
    kept = []
    for number, directory in enumerate(os.environ.get("PATH", "").split(os.pathsep)):
        here = Path(directory or ".")
        if not any((here / program).exists() for program in programs):
            kept.append(directory)
            continue
        copy = tmp_path / f"path-without-{number}"
        copy.mkdir(exist_ok=True)
        for entry in here.iterdir():
            if entry.name not in programs and not (copy / entry.name).exists():
                (copy / entry.name).symlink_to(entry)
        kept.append(str(copy))
    return os.pathsep.join(kept)


def _run_demo(tmp_path: Path, port: int, *, chromium: bool = True) -> Demo:
    env = {
        **os.environ,
        # A scratch embedded database: the demo migrates and seeds it from nothing.
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        "EVERDICT_DEMO_PORT": str(port),
        "COLUMNS": "120",
        # The demo's cases pace their steps for a person watching; inherited by the cases
        # through the runner, this makes them hurry (what they answer does not change).
        "DEMO_STEP_S": "0.05",
    }
    if not chromium:
        env["PATH"] = _path_without(tmp_path, "chromium", "chromium-browser")
    output = tmp_path / f"demo-{port}.out"
    with output.open("wb") as sink:
        proc = Demo(
            [sys.executable, "-m", "everdict.demo", "--state-dir", str(tmp_path)],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    proc.output = output
    return proc


def _stop(proc: Demo) -> tuple[int, list[psutil.Process]]:
    """Ctrl-C the demo; return its exit code and the descendants it had just before."""
    children = psutil.Process(proc.pid).children(recursive=True)
    proc.send_signal(signal.SIGINT)
    code = proc.wait(30)
    _, alive = psutil.wait_procs(children, timeout=5)
    return code, alive


@pytest.mark.browser
def test_the_demo_prints_a_scored_summary_and_leaves_nothing_behind(tmp_path: Path) -> None:
    port = free_port()
    proc = _run_demo(tmp_path, port)
    try:
        output = _read_until(proc, "press Ctrl-C to stop", SUMMARY_WITHIN_S)
        names = {p.name() for p in psutil.Process(proc.pid).children(recursive=True)}
        code, left = _stop(proc)
    finally:
        if proc.poll() is None:
            proc.kill()

    assert "Pass rate: 70% (7 pass, 3 fail, 0 error)" in output
    # The same questions graded by the demo's judge script: the same verdicts, judged.
    assert "graded by a judge on this machine" in output
    assert output.count("Pass rate: 70% (7 pass, 3 fail, 0 error)") == 2
    # With chromium here (the test is marked `browser`), a browser case runs too, headless.
    assert "of chromium driven headless" in output
    assert "Pass rate: 100% (2 pass, 0 fail, 0 error)" in output
    assert "capital-australia" in output and "power" in output and "trivia" in output
    assert f"http://127.0.0.1:{port}/runs/1/" in output
    assert "demo / demo" in output
    assert names  # it did start the server, the scheduler and the runner
    assert code == 0
    assert left == [], f"processes left behind: {left}"
    assert (tmp_path / "demo-runner.json").stat().st_mode & 0o077 == 0
    # Dispatched once the runner said hello: no "runner offline" warning on the first page.
    with sqlite3.connect(tmp_path / "demo.sqlite3") as db:
        events = [row[0] for row in db.execute("SELECT message FROM scorecards_runevent")]
    assert events and not [e for e in events if "offline" in e], events


def test_a_second_demo_start_reuses_what_the_first_seeded_on_a_machine_without_chromium(
    tmp_path: Path,
) -> None:
    # Each start dispatches its runs on from where the previous start left the numbering;
    # without chromium on the PATH, the demo says the browser harness cannot run here.
    last_run = 0
    for _ in range(2):
        port = free_port()
        proc = _run_demo(tmp_path, port, chromium=False)
        try:
            output = _read_until(proc, "press Ctrl-C to stop", SUMMARY_WITHIN_S)
            _, left = _stop(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
        runs = sorted({int(n) for n in re.findall(r"/runs/(\d+)/", output)})
        assert runs and runs[0] == last_run + 1, (last_run, runs)
        # The verified harness: the fix passes, the edited test is tampered and fails.
        assert "its agent's change verified by pytest" in output
        assert "Pass rate: 50% (1 pass, 1 fail, 0 error)" in output
        assert "fail (tampered)" in output
        last_run = runs[-1]
        assert "Starting runner #1 " in output  # the same runner, from its config file
        assert "No chromium here" in output
        assert left == []


def test_the_demo_refuses_a_port_in_use_clearly(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = _run_demo(tmp_path, port)
        proc.wait(60)
    output = proc.output.read_text()

    assert proc.returncode == 1
    assert f"port {port} on 127.0.0.1 is already in use" in output
    assert "--port" in output
