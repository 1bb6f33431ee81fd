"""Install, remove and inspect the runner's login service, on whichever manager the OS has.

Where a user service manager answers, `install` writes the unit and starts it; where none
does (a container, WSL without systemd), it writes the unit and prints the exact commands
that enable it once one runs. Nothing here needs privileges, and nothing runs
`loginctl enable-linger`: that is the member's choice, explained.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from runnercli.atomic import replace_file
from runnercli.login_service.host import Host, ServicePaths
from runnercli.login_service.launchd import LaunchdAgent
from runnercli.login_service.systemd import SystemdUser
from runnercli.login_service.units import LoginServiceError, LoginServiceSpec

Echo = Callable[[str], None]


class Backend(Protocol):
    """What install, uninstall, status and logs need of a service manager."""

    kind: str

    @property
    def host(self) -> Host: ...
    @property
    def unit_path(self) -> Path: ...

    def render(self, spec: LoginServiceSpec) -> bytes: ...
    def prepare(self) -> None: ...
    def answers(self) -> bool: ...
    def enable_commands(self) -> list[list[str]]: ...
    def disable_commands(self) -> list[list[str]]: ...
    def cleanup_commands(self) -> list[list[str]]: ...
    def reload_hint(self) -> list[str]: ...
    def state(self) -> str: ...
    def running(self) -> bool: ...
    def log_tail(self, lines: int = ...) -> list[str]: ...
    def follow_command(self, lines: int = ...) -> list[str] | None: ...
    def notes(self) -> list[str]: ...


def backend_for(
    platform: str | None = None, paths: ServicePaths | None = None, host: Host | None = None
) -> Backend:
    """The service manager of `platform` (default: this one): systemd or launchd."""
    platform = platform or sys.platform
    paths = paths or ServicePaths.from_env()
    host = host or Host()
    if platform.startswith("linux"):
        return SystemdUser(paths, host)
    if platform == "darwin":
        return LaunchdAgent(paths, host)
    raise LoginServiceError(
        f"no login service for {platform}: run `python -m runnercli run` instead"
    )


@dataclass
class Report:
    """What install or uninstall did: the file, the commands run, those left to the member."""

    path: Path
    changed: bool = False
    ran: list[list[str]] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    to_run: list[list[str]] = field(default_factory=list)


def shell_line(argv: list[str]) -> str:
    return shlex.join(argv)


def install(backend: Backend, spec: LoginServiceSpec, *, dry_run: bool, echo: Echo) -> Report:
    """Write the unit and start it where a user service manager answers."""
    content = backend.render(spec)
    report = Report(backend.unit_path)
    if dry_run:
        echo(f"# {backend.kind}, would be written to {backend.unit_path}")
        echo(content.decode().rstrip("\n"))
        report.to_run = backend.enable_commands()
        echo("# then: " + "; ".join(map(shell_line, report.to_run)))
        return report
    was_running = backend.unit_path.exists() and backend.answers() and backend.running()
    write_unit(backend.unit_path, content)
    backend.prepare()
    report.changed = True
    echo(f"✓ {backend.kind} written to {backend.unit_path}")
    _activate(backend, report, echo)
    if was_running and not report.failed:
        echo(f"  it was running already: `{shell_line(backend.reload_hint())}` restarts it")
        echo("  on the new unit (it finishes its running cases first)")
    for note in backend.notes():
        echo(f"  {note}")
    return report


def _activate(backend: Backend, report: Report, echo: Echo) -> None:
    commands = backend.enable_commands()
    if not backend.answers():
        report.to_run = commands
        echo("  no user service manager answers here (a container, or WSL without systemd);")
        echo("  once one runs, enable the service with:")
        for argv in commands:
            echo(f"    {shell_line(argv)}")
        return
    _run_all(backend, commands, report, echo)
    if not report.failed:
        echo("✓ enabled and started: it starts again at every login")


def _run_all(backend: Backend, commands: list[list[str]], report: Report, echo: Echo) -> None:
    for argv in commands:
        done = backend.host.run(argv)
        report.ran.append(argv)
        if not done.ok:
            report.failed.append(f"{shell_line(argv)}: {done.why()}")
            echo(f"✗ {shell_line(argv)}: {done.why()}")
            return


def uninstall(backend: Backend, *, echo: Echo) -> Report:
    """Stop and disable the service where a manager answers, then remove the unit."""
    report = Report(backend.unit_path)
    if not backend.unit_path.exists():
        echo(f"= no {backend.kind} at {backend.unit_path}: nothing to remove")
        return report
    answers = backend.answers()
    if answers:
        echo("  stopping it (a running runner finishes its cases first)")
        # Disabling one that is not loaded fails; removing its file is still right.
        for argv in backend.disable_commands():
            backend.host.run(argv)
            report.ran.append(argv)
    backend.unit_path.unlink()
    report.changed = True
    echo(f"✓ removed {backend.unit_path}")
    if answers:
        _run_all(backend, backend.cleanup_commands(), report, echo)
    return report


def write_unit(path: Path, content: bytes) -> None:
    """Replace `path` atomically with `content`, mode 0644 (service managers read it)."""
    try:
        replace_file(path, content, mode=0o644, directory_mode=0o755)
    except OSError as exc:
        raise LoginServiceError(f"cannot write {path}: {exc.strerror or exc}") from exc


@dataclass(frozen=True)
class ServiceStatus:
    kind: str
    path: Path
    installed: bool
    state: str
    log: list[str]


def service_status(backend: Backend, *, lines: int = 20) -> ServiceStatus:
    """Whether the unit is installed, what the manager says of it, its last log lines."""
    installed = backend.unit_path.exists()
    state = backend.state() if installed else "not installed"
    log = backend.log_tail(lines) if installed else []
    return ServiceStatus(backend.kind, backend.unit_path, installed, state, log)


def status_lines(status: ServiceStatus, *, server: str | None = None) -> list[str]:
    """`status` as the member reads it; `server` is what the server says of this runner."""
    where = str(status.path) if status.installed else f"not installed ({status.path})"
    lines = [f"service:  {status.kind} {where}", f"state:    {status.state}"]
    if server is not None:
        lines.append(f"server:   {server}")
    if status.log:
        lines.append("last log lines:")
        lines += [f"  {line}" for line in status.log]
    return lines
