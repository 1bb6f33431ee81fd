"""The machine the service is set up on: where its files go and how its programs are run.

Every path comes from the environment given (`HOME`, `XDG_CONFIG_HOME`, `PATH`), so the
same code writes into a member's home or a test's temporary one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from runnercli.login_service.units import LAUNCHD_LABEL, UNIT_NAME

COMMAND_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class ServicePaths:
    """Where the unit, the agent and the agent's log live for one home directory."""

    home: Path
    config_home: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ServicePaths:
        env = os.environ if env is None else env
        home = Path(env.get("HOME") or Path.home())
        # The XDG spec ignores a relative XDG_CONFIG_HOME; systemd does too.
        xdg = env.get("XDG_CONFIG_HOME", "")
        return cls(home, Path(xdg) if os.path.isabs(xdg) else home / ".config")

    @property
    def systemd_unit(self) -> Path:
        return self.config_home / "systemd" / "user" / UNIT_NAME

    @property
    def launch_agent(self) -> Path:
        return self.home / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"

    @property
    def launchd_logs(self) -> Path:
        return self.home / "Library" / "Logs" / "everdict"


@dataclass(frozen=True)
class Outcome:
    """How one command ended; 127 when the program is missing, 124 when it timed out."""

    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def why(self) -> str:
        text = (self.stderr.strip() or self.stdout.strip()).splitlines()
        return text[-1] if text else f"exit status {self.returncode}"


@dataclass(frozen=True)
class Host:
    """Finds and runs programs on `path` (None: this process's PATH), each within a timeout."""

    path: str | None = None
    timeout_s: float = COMMAND_TIMEOUT_S

    def which(self, program: str) -> str | None:
        return shutil.which(program, path=self.path)

    def run(self, argv: list[str]) -> Outcome:
        found = self.which(argv[0])
        if found is None:
            return Outcome(127, "", f"{argv[0]}: not found")
        try:
            done = subprocess.run(
                [found, *argv[1:]],
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return Outcome(124, "", f"{argv[0]}: no answer within {self.timeout_s:g}s")
        except OSError as exc:
            return Outcome(126, "", f"{argv[0]}: {exc.strerror}")
        return Outcome(done.returncode, done.stdout, done.stderr)
