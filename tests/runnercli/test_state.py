"""The runner's own report (`runner.state.json`): written atomically and only on change,
private to its owner, read back by `status` with whether its writer still runs."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

from runnercli.laptop.pidfile import ProcessId, process_start
from runnercli.laptop.state import (
    StateFile,
    read_state,
    report_lines,
    runner_report,
    state_path,
)


def test_the_report_is_written_0600_and_only_when_it_changes(tmp_path: Path) -> None:
    path = state_path(tmp_path / "runner.json")
    assert path == tmp_path / "runner.state.json"
    report = StateFile(path, clock=lambda: "2030-01-01T00:00:00+00:00")
    assert report.update(status="idle")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    first = path.stat().st_ino
    assert not report.update(status="idle")
    assert path.stat().st_ino == first, "unchanged: not written again"
    assert report.update(status="running 1 job", running=1, inhibitor="held")
    assert path.stat().st_ino != first, "replaced, never written in place"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runner.state.json"]
    written = json.loads(path.read_text())
    assert written | {"pid": 0, "process_started": ""} == {
        "pid": 0,
        "process_started": "",
        "started_at": "2030-01-01T00:00:00+00:00",
        "updated_at": "2030-01-01T00:00:00+00:00",
        "status": "running 1 job",
        "running": 1,
        "inhibitor": "held",
        "paused": None,
        "pending_consents": 0,
        "update": "",
    }


def test_status_reads_what_the_live_runner_says(tmp_path: Path) -> None:
    report = StateFile(state_path(tmp_path / "runner.json"))
    report.update(
        status="paused: on battery",
        paused="on battery",
        inhibitor="unavailable (no systemd-inhibit on PATH)",
        pending_consents=2,
    )
    read = runner_report(tmp_path / "runner.json")
    assert read.live and read.state == report.state
    lines = report_lines(read)
    assert lines[0].endswith(": paused: on battery")
    assert "cases:    0 running, 2 waiting for consent" in lines
    assert "awake:    unavailable (no systemd-inhibit on PATH)" in lines
    assert "paused:   on battery" in lines


def test_a_report_left_by_a_dead_runner_says_it_is_gone(tmp_path: Path) -> None:
    proc = subprocess.Popen(["sleep", "60"])
    gone = ProcessId(proc.pid, process_start(proc.pid) or "")
    proc.kill()
    proc.wait()
    StateFile(state_path(tmp_path / "runner.json"), me=gone).update(status="running 2 jobs")
    read = runner_report(tmp_path / "runner.json")
    assert not read.live
    assert report_lines(read) == [
        f"runner:   not running (pid {proc.pid} is gone; last said: running 2 jobs)"
    ]


def test_no_report_or_a_broken_one_is_no_runner(tmp_path: Path) -> None:
    assert report_lines(runner_report(tmp_path / "runner.json")) == [
        "runner:   not running (no report)"
    ]
    (tmp_path / "runner.state.json").write_text("{not json")
    assert read_state(tmp_path / "runner.state.json") is None


def test_a_runner_removes_its_own_report_and_no_one_elses(tmp_path: Path) -> None:
    path = state_path(tmp_path / "runner.json")
    mine = StateFile(path)
    mine.update(status="idle")
    other = StateFile(path, me=ProcessId(1, "someone else"))
    other.update(status="idle")
    mine.remove()
    assert read_state(path) == other.state
    other.remove()
    assert not path.exists()


def test_the_servers_strings_cannot_drive_the_terminal(tmp_path: Path) -> None:
    report = StateFile(state_path(tmp_path / "runner.json"))
    report.update(status="waiting for consent on \x1b]0;owned\x07acme/echo")
    line = report_lines(runner_report(tmp_path / "runner.json"))[0]
    assert "\x1b" not in line and "\x07" not in line
    assert "acme/echo" in line
