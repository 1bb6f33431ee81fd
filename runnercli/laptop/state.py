"""The running runner's own report, for `status`: a small file beside its config.

`runner.json` → `runner.state.json`, mode 0600, replaced atomically whenever what it says
changes: the process, its status line, how many cases run, whether it holds the machine
awake, why it is paused, how many harness versions wait for consent, a newer runner.
`status` reads it back and says whether the process that wrote it still runs, since a
killed runner leaves it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from runnercli.atomic import replace_file
from runnercli.console.terminal import clean
from runnercli.laptop.pidfile import PROC, ProcessId, this_process


def state_path(config_file: Path) -> Path:
    """The report of the runner whose config file is `config_file`."""
    return config_file.with_name(f"{config_file.stem}.state.json")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class RunnerState(BaseModel):
    """What the runner says of itself."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    pid: int
    process_started: str = ""
    started_at: str
    updated_at: str = ""
    status: str = ""
    running: int = 0
    inhibitor: str = "released"
    paused: str | None = None
    pending_consents: int = 0
    # A newer runner the server knows, and the command that installs it ("" when none).
    update: str = ""

    def process(self) -> ProcessId:
        return ProcessId(self.pid, self.process_started)


class StateFile:
    """The report one runner keeps: `update()` writes it when a field changed."""

    def __init__(
        self,
        path: Path,
        *,
        me: ProcessId | None = None,
        clock: Callable[[], str] = _now,
    ) -> None:
        me = me or this_process()
        self.path = path
        self.clock = clock
        self.state = RunnerState(pid=me.pid, process_started=me.started, started_at=clock())
        self._written = False

    def update(self, **changes: Any) -> bool:
        """Apply `changes`; write the file if they changed anything (or it is not written yet).

        Raises OSError when the file cannot be written.
        """
        state = self.state.model_copy(update=changes)
        if self._written and _same(state, self.state):
            return False
        state = state.model_copy(update={"updated_at": self.clock()})
        replace_file(self.path, (state.model_dump_json(indent=2) + "\n").encode())
        self.state = state
        self._written = True
        return True

    def remove(self) -> None:
        """Remove the report if it is still this runner's (another may have started since)."""
        current = read_state(self.path)
        if current is not None and current.process() == self.state.process():
            self.path.unlink(missing_ok=True)


def _same(a: RunnerState, b: RunnerState) -> bool:
    return a.model_dump(exclude={"updated_at"}) == b.model_dump(exclude={"updated_at"})


def read_state(path: Path) -> RunnerState | None:
    """The report at `path`, or None when there is none or it is unreadable."""
    try:
        return RunnerState.model_validate_json(path.read_bytes())
    except (OSError, ValidationError):
        return None


@dataclass(frozen=True)
class StateReport:
    """A report and whether the process that wrote it still runs."""

    path: Path
    state: RunnerState | None
    live: bool


def runner_report(config_file: Path, proc: Path = PROC) -> StateReport:
    """What the runner of `config_file` last said of itself, for `status`."""
    path = state_path(config_file)
    state = read_state(path)
    live = state is not None and state.process().alive(proc)
    return StateReport(path, state, live)


def report_lines(report: StateReport) -> list[str]:
    """The report as `status` prints it."""
    state = report.state
    if state is None:
        return ["runner:   not running (no report)"]
    if not report.live:
        return [
            f"runner:   not running (pid {state.pid} is gone; last said: {clean(state.status)})"
        ]
    lines = [
        f"runner:   pid {state.pid}, since {state.started_at}: {clean(state.status) or '…'}",
        f"cases:    {state.running} running, {state.pending_consents} waiting for consent",
        f"awake:    {clean(state.inhibitor)}",
    ]
    if state.paused:
        lines.append(f"paused:   {clean(state.paused)}")
    if state.update:
        lines.append(f"update:   {clean(state.update)}")
    return lines
