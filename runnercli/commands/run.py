"""`python -m runnercli run`: pull jobs for this machine and run them until stopped."""

from __future__ import annotations

import asyncio
import gc
import shlex
import sys

import click

from runnercli.case.process import watch_children_by_pidfd
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
from runnercli.config import (
    RunnerConfig,
    config_path,
    detected_capabilities,
    merge_capabilities,
    trust_path,
)
from runnercli.loop import RunnerLoop, stopping_on_signals
from runnercli.options import CONSENT_TIMEOUT_S, ConsentSettings, RunOptions
from runnercli.protocol import MAX_WAIT_MS, repo_capability
from runnercli.spool import spool_dir_for
from runnercli.status import StatusLine
from runnercli.trust import Entry, TrustError, parse_entries, server_key


@click.command()
@server_option
@token_option
@click.option(
    "--max-concurrent",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Cases run at once.",
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
    consent = ConsentSettings(
        trust_file=trust_path(path),
        server=server,
        session=check_entries(allow),
        standing=_standing(config),
        allow_any=allow_any,
        refused_env=config.refused_env,
        ask=sys.stdin.isatty() and sys.stdout.isatty(),
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
        consent=consent,
        max_concurrent=max_concurrent,
        wait_ms=wait_ms,
        once=once,
        spool_dir=spool_dir_for(path),
        repos=repos,
        redactor=redactor,
        no_files=no_files,
        no_screens=no_screens,
        no_trace=no_trace,
    )
    consent.withheld = options.withheld
    # What is loaded by now lives as long as the runner: kept out of every collection.
    gc.freeze()
    sys.exit(asyncio.run(_run(server, token, options)))


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


async def _run(server: str, token: str, options: RunOptions) -> int:
    watch_children_by_pidfd()
    client = RunnerClient(server, token, max_wait_ms=options.wait_ms, slots=options.slots)
    async with client:
        with StatusLine() as status:
            runner = RunnerLoop(client, options, status)
            # Ctrl-C drains, twice hands the running cases back.
            with stopping_on_signals(runner.request_stop):
                return await runner.run()
