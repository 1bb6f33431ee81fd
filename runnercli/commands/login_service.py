"""`python -m runnercli service install [--dry-run] | uninstall | status | logs`: the runner
as the member's login service (a systemd user unit on Linux, a launchd agent on macOS).

`service_group(hello=…)` builds the group; `hello` is given the config path and returns what
the server says of this runner, for `status`.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable
from pathlib import Path

import click

from runnercli.client import RevokedError, RunnerClient
from runnercli.config import ConfigError, config_load, config_path
from runnercli.console.terminal import clean
from runnercli.laptop.state import report_lines, runner_report
from runnercli.laptop.updates import update_advice, upgrade_message
from runnercli.login_service.manager import (
    Backend,
    backend_for,
    install,
    service_status,
    status_lines,
    uninstall,
)
from runnercli.login_service.units import LoginServiceError, login_service_spec
from runnercli.protocol import PROTOCOL_VERSION

HelloLine = Callable[[Path], str]

config_option = click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="The runner's config file (default ~/.config/everdict/runner.json; "
    "$EVERDICT_RUNNER_CONFIG).",
)


def _backend(make: Callable[[], Backend]) -> Backend:
    try:
        return make()
    except LoginServiceError as exc:
        raise click.ClickException(str(exc)) from exc


def _paired(path: Path) -> bool:
    try:
        return bool(config_load(path).token)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


def service_group(
    hello: HelloLine | None = None, *, backend: Callable[[], Backend] = backend_for
) -> click.Group:
    """The `service` command group; `backend` picks the service manager (tests pass theirs)."""

    @click.group(name="service")
    def service() -> None:
        """Run the runner as your login service: started at login, restarted if it fails."""

    @service.command(name="install")
    @click.option(
        "--dry-run", is_flag=True, help="Print the unit and where it goes; change nothing."
    )
    @config_option
    def install_command(dry_run: bool, config_file: str | None) -> None:
        """Write the service for this config and start it (or say how, where nothing answers)."""
        path = config_path(config_file)
        paired = _paired(path)
        if not paired and not dry_run:
            raise click.ClickException(
                f"{path} is not paired yet: pair first (python -m runnercli pair …), "
                "then install the service"
            )
        manager = _backend(backend)
        try:
            report = install(manager, login_service_spec(path), dry_run=dry_run, echo=click.echo)
        except LoginServiceError as exc:
            raise click.ClickException(str(exc)) from exc
        if dry_run and not paired:
            click.echo(f"# note: {path} is not paired yet; install refuses until it is")
        if report.failed:
            raise SystemExit(1)

    @service.command(name="uninstall")
    def uninstall_command() -> None:
        """Stop the service and remove it (the runner finishes its running cases first)."""
        report = uninstall(_backend(backend), echo=click.echo)
        if report.failed:
            raise SystemExit(1)

    @service.command(name="status")
    @click.option("-n", "--lines", type=click.IntRange(0, 1000), default=20, show_default=True)
    @config_option
    def status_command(lines: int, config_file: str | None) -> None:
        """Installed? running? its last log lines, and what the server says of this runner."""
        path = config_path(config_file)
        current = service_status(_backend(backend), lines=lines)
        for line in status_lines(current, server=_server_line(hello, path)):
            click.echo(clean(line))
        for line in report_lines(runner_report(path)):
            click.echo(line)

    @service.command(name="logs")
    @click.option("-f", "--follow", is_flag=True, help="Keep printing new lines (Ctrl-C ends).")
    @click.option("-n", "--lines", type=click.IntRange(0, 10000), default=50, show_default=True)
    def logs_command(follow: bool, lines: int) -> None:
        """Print the service's log."""
        manager = _backend(backend)
        if not follow:
            for line in manager.log_tail(lines):
                click.echo(clean(line))
            return
        argv = manager.follow_command(lines)
        if argv is None:
            raise click.ClickException(f"no way to follow the log of the {manager.kind} here")
        try:
            subprocess.run(argv, check=False)
        except KeyboardInterrupt:
            pass

    return service


def _server_line(hello: HelloLine | None, path: Path) -> str | None:
    if hello is None:
        return None
    try:
        return hello(path)
    except Exception as exc:  # what the server says is a line of status, never its failure
        return f"cannot ask: {exc}"


def hello_line(path: Path) -> str:
    """What the server says of the runner of config `path`: `hello`, sending no status (the
    running runner's own status stays on the roster)."""
    config = config_load(path)
    if not config.server or not config.token:
        return "not paired"
    return asyncio.run(_hello_line(config.server, config.token))


async def _hello_line(server: str, token: str) -> str:
    try:
        async with RunnerClient(server, token) as client:
            hello = await client.hello(capabilities=[], status="")
    except RevokedError:
        return "this runner was revoked — pair again"
    said = f"runner {hello.runner_id} “{hello.label}” of {hello.owner} at {server}"
    if hello.update_required:
        return f"{said}; {upgrade_message(PROTOCOL_VERSION)}"
    advice = update_advice(hello.latest_runner_version)
    return f"{said}; {advice.line()}" if advice is not None else said


service = service_group(hello_line)
