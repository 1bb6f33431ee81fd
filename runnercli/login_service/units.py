"""The runner as a login service: the systemd user unit and the launchd agent, as text.

Both start `<this interpreter> -m runnercli run --config <config> --service` and stop it with
SIGTERM, which drains the runner: it finishes the cases it holds, delivers their results and
exits 0. A service manager restarts it only when it failed, and never when it stopped on
purpose: revoked (3) and update required (4) are final until the member acts.
"""

from __future__ import annotations

import os
import plistlib
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from runnercli.console.exits import EXIT_REVOKED, EXIT_UPDATE_REQUIRED

UNIT_NAME = "everdict-runner.service"
LAUNCHD_LABEL = "dev.everdict.runner"
LOG_FILE_NAME = "runner.log"
# Long enough for a draining runner to deliver what it finished; a case still running after
# it is killed with the rest of the service, and its lease lapses back to the queue.
STOP_TIMEOUT_S = 120
NO_RESTART_EXITS = (EXIT_REVOKED, EXIT_UPDATE_REQUIRED)

# A word systemd reads as is, without quotes or escapes.
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_@+=:,./-]+")
# What no executable path in a unit may hold (systemd refuses the unit).
_UNSAFE_IN_PATH = re.compile(r"[\"'\\\x00-\x1f\x7f]")


class LoginServiceError(Exception):
    """The service cannot be set up as asked."""


@dataclass(frozen=True)
class LoginServiceSpec:
    """What the service runs: the interpreter, the config it runs with, its environment."""

    python: str
    config: Path
    environment: dict[str, str] = field(default_factory=dict)
    stop_timeout_s: int = STOP_TIMEOUT_S

    def argv(self) -> list[str]:
        return [self.python, "-m", "runnercli", "run", "--config", str(self.config), "--service"]


def login_service_spec(
    config: Path, *, python: str | None = None, env: Mapping[str, str] | None = None
) -> LoginServiceSpec:
    """Describe the service for `config`, run by this interpreter with the caller's PATH.

    PATH is carried over because a service manager starts services with a bare one, and the
    harnesses the member runs (`claude`, `node`, `git` from their shell) must be found as in
    their terminal. Output unbuffered, so the log shows each line as it happens.
    """
    env = os.environ if env is None else env
    # The interpreter as invoked, not resolved: a virtual environment's python is a link.
    interpreter = os.path.abspath(python or sys.executable)
    environment = {"PYTHONUNBUFFERED": "1"}
    if env.get("PATH"):
        environment["PATH"] = env["PATH"]
    return LoginServiceSpec(interpreter, Path(os.path.abspath(config)), environment)


def _escape(word: str, *, dollars: bool) -> str:
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    escaped = escaped.replace("\n", "\\n").replace("\t", "\\t")
    return escaped.replace("$", "$$") if dollars else escaped


def systemd_word(word: str, *, dollars: bool = True) -> str:
    """One word of a unit setting: quoted when it holds anything but plain characters.

    Specifiers (`%`) are expanded everywhere, variables (`$`) in command arguments only
    (`dollars`): both are doubled to stay literal.
    """
    if _PLAIN_WORD.fullmatch(word):
        return word
    return '"' + _escape(word, dollars=dollars) + '"'


def systemd_exec_line(argv: list[str]) -> str:
    """The ExecStart= value for `argv`; the executable path is never variable-expanded."""
    executable, *args = argv
    if _UNSAFE_IN_PATH.search(executable):
        raise LoginServiceError(
            f"systemd cannot start a program whose path holds quotes, backslashes or control "
            f"characters: {executable!r}; install the runner under another path"
        )
    return " ".join([systemd_word(executable, dollars=False), *(systemd_word(arg) for arg in args)])


def render_systemd_unit(spec: LoginServiceSpec) -> str:
    """The text of `~/.config/systemd/user/everdict-runner.service`."""
    environment = [
        "Environment=" + systemd_word(f"{key}={value}", dollars=False)
        for key, value in sorted(spec.environment.items())
    ]
    no_restart = " ".join(str(code) for code in NO_RESTART_EXITS)
    lines = [
        "[Unit]",
        "Description=Everdict runner: runs your workspace's evaluation cases on this machine",
        "",
        "[Service]",
        "Type=exec",
        f"ExecStart={systemd_exec_line(spec.argv())}",
        *environment,
        "Restart=on-failure",
        "RestartSec=10",
        f"RestartPreventExitStatus={no_restart}",
        "KillSignal=SIGTERM",
        # SIGTERM to the runner alone: it drains, finishing its cases. Sent to the whole
        # group (the default), it would kill every running case with it.
        "KillMode=mixed",
        f"TimeoutStopSec={spec.stop_timeout_s}",
        "",
        "[Install]",
        "WantedBy=default.target",
    ]
    return "\n".join(lines) + "\n"


def render_launchd_plist(spec: LoginServiceSpec, log_dir: Path) -> bytes:
    """The bytes of `~/Library/LaunchAgents/dev.everdict.runner.plist`."""
    log_file = str(log_dir / LOG_FILE_NAME)
    agent: dict[str, object] = {
        "Label": LAUNCHD_LABEL,
        "ProgramArguments": spec.argv(),
        "EnvironmentVariables": dict(sorted(spec.environment.items())),
        "RunAtLoad": True,
        # Restarted when it failed, not when it exited 0 (drained, or told why it stopped).
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 10,
        # launchd's time between SIGTERM and SIGKILL (20 s by default).
        "ExitTimeOut": spec.stop_timeout_s,
        "StandardOutPath": log_file,
        "StandardErrorPath": log_file,
    }
    return plistlib.dumps(agent, fmt=plistlib.FMT_XML, sort_keys=False)
