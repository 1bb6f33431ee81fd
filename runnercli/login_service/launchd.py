"""The runner as a launchd agent (macOS): `launchctl` in the member's GUI domain."""

from __future__ import annotations

import os
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from runnercli.login_service.host import Host, ServicePaths
from runnercli.login_service.units import (
    LAUNCHD_LABEL,
    LOG_FILE_NAME,
    LoginServiceSpec,
    render_launchd_plist,
)

LOG_LINES = 20


@dataclass(frozen=True)
class LaunchdAgent:
    """A launch agent in `~/Library/LaunchAgents`, logging to `~/Library/Logs/everdict/`."""

    paths: ServicePaths
    host: Host
    uid: int = field(default_factory=os.getuid)
    kind = "launchd agent"

    @property
    def unit_path(self) -> Path:
        return self.paths.launch_agent

    @property
    def log_file(self) -> Path:
        return self.paths.launchd_logs / LOG_FILE_NAME

    @property
    def domain(self) -> str:
        return f"gui/{self.uid}"

    @property
    def target(self) -> str:
        return f"{self.domain}/{LAUNCHD_LABEL}"

    def render(self, spec: LoginServiceSpec) -> bytes:
        return render_launchd_plist(spec, self.paths.launchd_logs)

    def prepare(self) -> None:
        """launchd opens the log file but does not create its directory."""
        self.paths.launchd_logs.mkdir(parents=True, exist_ok=True)

    def answers(self) -> bool:
        return self.host.run(["launchctl", "print", self.domain]).ok

    def enable_commands(self) -> list[list[str]]:
        return [
            ["launchctl", "enable", self.target],
            ["launchctl", "bootstrap", self.domain, str(self.unit_path)],
        ]

    def disable_commands(self) -> list[list[str]]:
        return [["launchctl", "bootout", self.target]]

    def cleanup_commands(self) -> list[list[str]]:
        return []

    def reload_hint(self) -> list[str]:
        return ["launchctl", "kickstart", "-k", self.target]

    def state(self) -> str:
        """`running (pid N)`, `loaded, not running…`, `not loaded`, or why it is not known."""
        if not self.answers():
            return "unknown: launchctl does not answer"
        done = self.host.run(["launchctl", "print", self.target])
        if not done.ok:
            return "not loaded"
        fields = dict(re.findall(r"^\s*([a-z][a-z ]*?) = (.*)$", done.stdout, re.MULTILINE))
        if fields.get("state") == "running":
            return f"running (pid {fields.get('pid', '?')})"
        last = fields.get("last exit code")
        return f"loaded, not running (last exit code {last})" if last else "loaded, not running"

    def running(self) -> bool:
        return self.state().startswith("running")

    def log_tail(self, lines: int = LOG_LINES) -> list[str]:
        try:
            with self.log_file.open(encoding="utf-8", errors="replace") as handle:
                return [line.rstrip("\n") for line in deque(handle, maxlen=lines)]
        except FileNotFoundError:
            return [f"(no log yet: {self.log_file})"]
        except OSError as exc:
            return [f"(cannot read {self.log_file}: {exc.strerror})"]

    def follow_command(self, lines: int = LOG_LINES) -> list[str] | None:
        if not self.host.which("tail"):
            return None
        return ["tail", "-n", str(lines), "-F", str(self.log_file)]

    def notes(self) -> list[str]:
        return [f"it runs while you are logged in; its log: {self.log_file}"]
