"""`python -m runnercli run`: pull jobs for this machine and run them until stopped."""

from __future__ import annotations

import asyncio
import gc
import shlex
import sys

import click

from runnercli.case.consent.pending import pending_dir
from runnercli.case.consent.settings import CONSENT_TIMEOUT_S, ConsentSettings
from runnercli.case.consent.trust import Entry, TrustError, parse_entries, server_key
from runnercli.case.delivery.spool import spool_dir_for
from runnercli.case.services.records import services_dir_for
from runnercli.case.spawn import watch_children_by_pidfd
from runnercli.client import RunnerClient
from runnercli.commands.common import (
    allow_option,
    capability_option,
    check_capabilities,
    check_entries,
    check_redact,
    check_repos,
    check_server,
    check_token,
    config_option,
    insecure_option,
    load_config,
    server_option,
    token_option,
)
from runnercli.commands.loop import RunnerLoop, stopping_on_signals
from runnercli.config import (
    RunnerConfig,
    config_path,
    detected_capabilities,
    merge_capabilities,
    trust_path,
)
from runnercli.console.status import StatusLine
from runnercli.console.taskdump import dumping_tasks_on_signal
from runnercli.laptop.pidfile import AlreadyRunning, Pidfile, pidfile_path
from runnercli.laptop.power import OnBattery
from runnercli.laptop.state import state_path
from runnercli.login_service.units import NO_RESTART_EXITS
from runnercli.options import SERVICES_IDLE_S, RunOptions, ServiceSettings
from runnercli.protocol import MAX_WAIT_MS, repo_capability
from runnercli.slots import MAX_CONCURRENT_TYPE


@click.command()
@server_option
@token_option
@click.option(
    "--max-concurrent",
    type=MAX_CONCURRENT_TYPE,
    default="1",
    show_default=True,
    help="Cases run at once; auto: half this machine's cores, at least 1.",
)
@click.option(
    "--wait-ms",
    type=click.IntRange(0, MAX_WAIT_MS),
    # The longest the protocol allows: the server's `hello` (limits.max_wait_ms) may offer
    # less, and the client keeps within that, so by default a runner waits as long as the
    # server offers and an idle runner costs the server as few polls as it allows.
    default=MAX_WAIT_MS,
    show_default=True,
    help="How long one lease request waits for a job, at most what the server offers.",
)
@capability_option
@click.option("--once", is_flag=True, help="Wait for one job, run it, exit.")
@allow_option
@click.option(
    "--allow-any",
    is_flag=True,
    help="Run any harness the server sends, without asking (throwaway machines only).",
)
@click.option(
    "--consent-timeout",
    type=click.FloatRange(1, 24 * 3600),
    default=CONSENT_TIMEOUT_S,
    show_default=True,
    help="Seconds to wait for your answer on the terminal before refusing the case.",
)
@click.option(
    "--no-files",
    is_flag=True,
    help="Answer no page's request for a running case's files (they stay on this machine).",
)
@click.option("--no-screens", is_flag=True, help="Send no screens of a running case.")
@click.option("--no-trace", is_flag=True, help="Send no trace of a case (its steps stay here).")
@click.option(
    "--services-idle-s",
    type=click.FloatRange(0, 7 * 24 * 3600),
    default=SERVICES_IDLE_S,
    show_default=True,
    help="Seconds a harness version's services stay up after its last case here.",
)
@click.option(
    "--max-service-starts",
    type=click.IntRange(1, 16),
    default=1,
    show_default=True,
    help="Service topologies started at once (a burst of cases does not start them all).",
)
@click.option(
    "--allow-sleep",
    is_flag=True,
    help="Let the machine sleep while cases run (by default it is kept awake).",
)
@click.option(
    "--on-battery",
    type=click.Choice([policy.value for policy in OnBattery]),
    default=OnBattery.PAUSE.value,
    show_default=True,
    help="On battery: pause (finish what it holds, lease nothing) or run as on AC.",
)
@click.option(
    "--service",
    "as_service",
    is_flag=True,
    help="Run as the login service (`service install` sets it): questions wait for "
    "`python -m runnercli allow --pending N` instead of a terminal.",
)
@insecure_option
@config_option
def run(
    server: str | None,
    token: str | None,
    max_concurrent: int,
    wait_ms: int,
    capabilities: tuple[str, ...],
    once: bool,
    allow: tuple[str, ...],
    allow_any: bool,
    consent_timeout: float,
    no_files: bool,
    no_screens: bool,
    no_trace: bool,
    services_idle_s: float,
    max_service_starts: int,
    allow_sleep: bool,
    on_battery: str,
    as_service: bool,
    insecure: bool,
    config_file: str | None,
) -> None:
    """Pull jobs for this machine and run them until stopped (Ctrl-C drains, twice aborts).

    A harness version you have not allowed (`--allow`, `python -m runnercli allow`) is
    shown in full and asked about on a terminal, refused without one. Mapped repos
    (`python -m runnercli repo add`) are offered as capabilities repo:NAME; the config's
    `redact` patterns hide what they match in everything that leaves this machine.
    """
    path, config = load_config(config_file)
    if allow_any and allow:
        raise click.UsageError("--allow-any runs anything: it cannot be combined with --allow")
    server = check_server(server or config.server, insecure=insecure or config.insecure)
    token = check_token(token or config.token)
    redactor, repos = check_redact(path, config), check_repos(path, config)
    ask = not as_service and sys.stdin.isatty() and sys.stdout.isatty()
    consent = ConsentSettings(
        trust_file=trust_path(path),
        server=server,
        session=check_entries(allow),
        standing=_standing(config),
        allow_any=allow_any,
        refused_env=config.refused_env,
        ask=ask,
        # As a service, with no terminal to ask on, a question waits for
        # `allow --pending N` rather than failing every new harness version.
        pending_dir=pending_dir(path) if as_service else None,
        timeout_s=consent_timeout,
        command_options=_command_options(config_file, server, config),
        redact_patterns=len(redactor.patterns),
    )
    options = RunOptions(
        capabilities=merge_capabilities(
            config.capabilities,
            check_capabilities(capabilities),
            detected_capabilities(),
            [repo_capability(name) for name in sorted(repos)],
        ),
        max_concurrent=max_concurrent,
        wait_ms=wait_ms,
        once=once,
        spool_dir=spool_dir_for(path),
        repos=repos,
        redactor=redactor,
        no_files=no_files,
        no_screens=no_screens,
        no_trace=no_trace,
        allow_sleep=allow_sleep,
        on_battery=on_battery,
        state_file=state_path(path),
        services=ServiceSettings(
            idle_s=services_idle_s,
            max_starts=max_service_starts,
            runner=str(config.runner_id or config.label or "local"),
            records_dir=services_dir_for(path),
        ),
    )
    consent.withheld = options.withheld
    # What is loaded by now lives as long as the runner: kept out of every collection.
    gc.freeze()
    try:
        with Pidfile(pidfile_path(path)):
            code = asyncio.run(_run(server, token, options, consent))
    except AlreadyRunning as exc:
        raise click.ClickException(f"{exc}; `python -m runnercli drain` stops it") from exc
    sys.exit(_service_exit(code) if as_service else code)


def _service_exit(code: int) -> int:
    """Under launchd (`KeepAlive: {SuccessfulExit: false}`) a revoked or outdated runner
    exits 0 once it said why, or it would be started again and again; systemd's unit names
    those codes in `RestartPreventExitStatus` and keeps them."""
    if sys.platform == "darwin" and code in NO_RESTART_EXITS:
        click.echo(f"the service stops (exit {code} above): it is not restarted until you act")
        return 0
    return code


def _standing(config: RunnerConfig) -> list[Entry]:
    try:
        return parse_entries(config.allow)
    except TrustError as exc:
        raise click.ClickException(f"the config's allow list: {exc}") from exc


def _command_options(config_file: str | None, server: str, config: RunnerConfig) -> str:
    """What `allow` needs to reach this runner's trust store and server, when not defaults."""
    options = []
    if config_file:
        options += ["--config", shlex.quote(str(config_path(config_file)))]
    if config.server is None or server_key(server) != server_key(config.server):
        options += ["--server", shlex.quote(server)]
    return " ".join(options)


async def _run(server: str, token: str, options: RunOptions, consent: ConsentSettings) -> int:
    watch_children_by_pidfd()
    client = RunnerClient(server, token, max_wait_ms=options.wait_ms, slots=options.slots)
    # SIGUSR1 writes what it waits on to the log, its closing included.
    with dumping_tasks_on_signal():
        async with client:
            with StatusLine() as status:
                runner = RunnerLoop(client, options, status, consent=consent)
                # Ctrl-C drains, twice hands the running cases back.
                with stopping_on_signals(runner.request_stop):
                    return await runner.run()
