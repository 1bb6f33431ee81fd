"""The runner as a systemd user service (Linux): `systemctl --user`, `journalctl --user`."""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from pathlib import Path

from runnercli.login_service.host import Host, ServicePaths
from runnercli.login_service.units import UNIT_NAME, LoginServiceSpec, render_systemd_unit

LOG_LINES = 20


@dataclass(frozen=True)
class SystemdUser:
    """A systemd user unit in the member's config directory."""

    paths: ServicePaths
    host: Host
    kind = "systemd user unit"

    @property
    def unit_path(self) -> Path:
        return self.paths.systemd_unit

    def render(self, spec: LoginServiceSpec) -> bytes:
        return render_systemd_unit(spec).encode()

    def prepare(self) -> None:
        """Nothing besides the unit: its output goes to the journal."""

    def answers(self) -> bool:
        """Whether a user service manager runs for this user (none in most containers)."""
        return self.host.run(["systemctl", "--user", "show-environment"]).ok

    def enable_commands(self) -> list[list[str]]:
        return [
            ["systemctl", "--user", "daemon-reload"],
            ["systemctl", "--user", "enable", "--now", UNIT_NAME],
        ]

    def disable_commands(self) -> list[list[str]]:
        return [["systemctl", "--user", "disable", "--now", UNIT_NAME]]

    def cleanup_commands(self) -> list[list[str]]:
        return [["systemctl", "--user", "daemon-reload"]]

    def reload_hint(self) -> list[str]:
        return ["systemctl", "--user", "restart", UNIT_NAME]

    def state(self) -> str:
        """`active`, `inactive`, `failed`…, or why it cannot be known."""
        if not self.answers():
            return "unknown: no user service manager answers"
        done = self.host.run(["systemctl", "--user", "is-active", UNIT_NAME])
        return done.stdout.strip() or done.why()

    def running(self) -> bool:
        return self.state() in ("active", "activating", "reloading", "deactivating")

    def log_tail(self, lines: int = LOG_LINES) -> list[str]:
        done = self.host.run(self._journal(["-n", str(lines), "--no-pager"]))
        if not done.ok:
            return [f"(no log: {done.why()})"]
        return done.stdout.splitlines()

    def follow_command(self, lines: int = LOG_LINES) -> list[str] | None:
        return self._journal(["-n", str(lines), "-f"]) if self.host.which("journalctl") else None

    def _journal(self, options: list[str]) -> list[str]:
        return ["journalctl", "--user", "-u", UNIT_NAME, "-o", "short-iso", *options]

    def notes(self) -> list[str]:
        user = getpass.getuser()
        linger = self.host.run(["loginctl", "show-user", user, "--property=Linger", "--value"])
        if linger.ok and linger.stdout.strip() == "yes":
            return [f"lingering is on for {user}: it runs from boot, without a login session"]
        return [
            "it runs while you are logged in. To keep it running from boot, logged in or not,",
            f"let your user manager linger (once; may ask for a password): "
            f"loginctl enable-linger {user}",
        ]
