"""`python -m runnercli` / `everdict-runner`: pair this machine, run cases, check the setup."""

from __future__ import annotations

import asyncio
import gc
import os
import shlex
import stat
import sys
import time
from pathlib import Path

import click

from runnercli.client import RevokedError, RunnerClient, ServerUnavailable, ToolCallError
from runnercli.commands import trust as trust_commands
from runnercli.config import (
    SERVER_ENV,
    TOKEN_ENV,
    ConfigError,
    RunnerConfig,
    config_load,
    config_path,
    config_save,
    detected_capabilities,
    invalid_capabilities,
    is_loopback,
    mask_token,
    mcp_url,
    merge_capabilities,
    runnercli_version,
    trust_path,
)
from runnercli.consent import CONSENT_TIMEOUT_S, ConsentSettings
from runnercli.device import DevicePairingFailed, default_label, device_pair
from runnercli.executor import watch_children_by_pidfd
from runnercli.exits import EXIT_NOT_REPORTED, EXIT_REVOKED, EXIT_UPDATE_REQUIRED, UPGRADE_MESSAGE
from runnercli.loop import RunnerLoop, RunOptions
from runnercli.protocol import MAX_WAIT_MS, PROTOCOL_VERSION, Hello
from runnercli.spool import spool_dir_for
from runnercli.status import StatusLine
from runnercli.submit import submit
from runnercli.terminal import clean
from runnercli.trust import Entry, TrustError, TrustStore, parse_entries, server_key

PAIR_HINT = "python -m runnercli pair --server URL --token rnr_…"

config_option = click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="Config file (default ~/.config/everdict/runner.json; $EVERDICT_RUNNER_CONFIG).",
)
server_option = click.option(
    "--server", envvar=SERVER_ENV, help="Base URL of the Everdict server ($EVERDICT_SERVER)."
)
token_option = click.option(
    "--token", envvar=TOKEN_ENV, help="The rnr_… runner token ($EVERDICT_RUNNER_TOKEN)."
)
capability_option = click.option(
    "--capability",
    "capabilities",
    multiple=True,
    help="A capability this machine offers, besides the detected ones (repeatable).",
)
allow_option = click.option(
    "--allow",
    "allow",
    multiple=True,
    metavar="HARNESS",
    help="Allow this harness without asking: WORKSPACE/NAME (every version), "
    "WORKSPACE/NAME@VERSION, NAME or NAME@VERSION (any workspace); repeatable.",
)
insecure_option = click.option(
    "--insecure",
    is_flag=True,
    help="Allow plain http:// to a server not on this machine (the token crosses in clear).",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(runnercli_version(), prog_name="everdict-runner")
def cli() -> None:
    """The Everdict runner: runs your workspace's evaluation cases on this machine."""


cli.add_command(submit)


def main() -> None:
    cli(prog_name="everdict-runner")


cli.add_command(trust_commands.allow)
cli.add_command(trust_commands.trust)


def _load(config_file: str | None) -> tuple[Path, RunnerConfig]:
    path = config_path(config_file)
    try:
        return path, config_load(path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


def _check_server(server: str | None, *, insecure: bool = False) -> str:
    if not server:
        raise click.UsageError(f"no server: pass --server URL or set ${SERVER_ENV}")
    if not server.startswith(("http://", "https://")):
        raise click.BadParameter(f"{server!r} is not an http(s) URL", param_hint="--server")
    if server.startswith("http://") and not insecure and not is_loopback(server):
        raise click.BadParameter(
            f"{clean(server)} is plain http:// to another machine: the runner token would "
            "cross the network in clear. Use https://, or pass --insecure to accept that.",
            param_hint="--server",
        )
    return server.rstrip("/")


def _check_entries(entries: tuple[str, ...]) -> list[Entry]:
    try:
        return parse_entries(entries)
    except TrustError as exc:
        raise click.BadParameter(str(exc), param_hint="--allow") from exc


def _check_token(token: str | None) -> str:
    if not token:
        raise click.UsageError(f"no runner token: pass --token rnr_… or set ${TOKEN_ENV}")
    if token.startswith("evk_"):
        raise click.BadParameter(
            "that is an API key; a runner needs its rnr_… token (from POST /api/runners "
            "or your account page)",
            param_hint="--token",
        )
    if not token.startswith("rnr_"):
        raise click.BadParameter("a runner token starts with rnr_", param_hint="--token")
    return token


def _check_capabilities(capabilities: tuple[str, ...]) -> list[str]:
    if bad := invalid_capabilities(capabilities):
        raise click.BadParameter(
            f"{', '.join(bad)}: a capability is [a-z0-9][a-z0-9._-]{{0,39}}",
            param_hint="--capability",
        )
    return list(capabilities)


async def _hello(server: str, token: str, capabilities: list[str]) -> Hello:
    async with RunnerClient(server, token) as client:
        return await client.hello(capabilities=capabilities, status="idle")


def _hello_or_exit(server: str, token: str, capabilities: list[str]) -> Hello:
    """Call `hello` once; turn each way it can fail into a message and an exit code."""
    try:
        hello = asyncio.run(_hello(server, token, capabilities))
    except RevokedError:
        click.echo(
            "✗ the server refused this token (HTTP 401): this runner was revoked — pair again",
            err=True,
        )
        sys.exit(EXIT_REVOKED)
    except ServerUnavailable as exc:
        click.echo(f"✗ cannot reach server: {clean(exc)}", err=True)
        sys.exit(EXIT_NOT_REPORTED)
    except ToolCallError as exc:
        click.echo(f"✗ the server refused this runner: {clean(exc)}", err=True)
        sys.exit(EXIT_NOT_REPORTED)
    if hello.update_required:
        click.echo(f"✗ {UPGRADE_MESSAGE.format(protocol=PROTOCOL_VERSION)}", err=True)
        sys.exit(EXIT_UPDATE_REQUIRED)
    return hello


@cli.command()
@server_option
@token_option
@click.option("--label", help="This machine's name when pairing by code (default: the host name).")
@capability_option
@click.option("--no-browser", is_flag=True, help="Pairing by code: print the page, open nothing.")
@allow_option
@insecure_option
@config_option
def pair(
    server: str | None,
    token: str | None,
    label: str | None,
    capabilities: tuple[str, ...],
    no_browser: bool,
    allow: tuple[str, ...],
    insecure: bool,
    config_file: str | None,
) -> None:
    """Pair this machine: approve the code it shows in your browser, or give a runner token
    (--token, for machines without a browser at hand); store it for `run`.

    `--allow` entries go to the trust store for this server (`python -m runnercli trust`).
    """
    path, config = _load(config_file)
    server = _check_server(server, insecure=insecure)
    extra = _check_capabilities(capabilities)
    entries = _check_entries(allow)
    if token:
        token = _check_token(token)
        if label:
            click.echo("note: --label is ignored with --token: the label was set with the token")
    else:
        offered = merge_capabilities(extra, detected_capabilities())
        token = _device_token(server, label or default_label(), offered, not no_browser)
    hello = _hello_or_exit(server, token, merge_capabilities(extra, detected_capabilities()))
    config = config.model_copy(
        update={
            "server": server,
            "token": token,
            "runner_id": hello.runner_id,
            "label": hello.label,
            "owner": hello.owner,
            "capabilities": merge_capabilities(extra) if extra else config.capabilities,
            "insecure": insecure,
        }
    )
    try:
        config_save(path, config)
        store = TrustStore(trust_path(path), server)
        for entry in entries:
            store.add(entry)
    except (ConfigError, TrustError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(
        f"✓ paired with {server} as runner {hello.runner_id} "
        f"“{clean(hello.label)}” of {clean(hello.owner)}"
    )
    click.echo(f"  config saved to {path} (mode 0600)")
    if entries:
        click.echo(f"  allowed: {', '.join(map(str, entries))} (in {trust_path(path)})")
    click.echo("  start it with: python -m runnercli run")


def _device_token(server: str, label: str, capabilities: list[str], browser: bool) -> str:
    try:
        granted = device_pair(
            server, label=label, capabilities=capabilities, open_browser=browser, echo=click.echo
        )
    except DevicePairingFailed as exc:
        click.echo(f"✗ {exc}", err=True)
        sys.exit(EXIT_NOT_REPORTED)
    return granted.token


@cli.command()
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
    insecure: bool,
    config_file: str | None,
) -> None:
    """Pull jobs for this machine and run them until stopped (Ctrl-C drains, twice aborts).

    A harness version you have not allowed (`--allow`, `python -m runnercli allow`) is
    shown in full and asked about on a terminal, refused without one.
    """
    path, config = _load(config_file)
    if allow_any and allow:
        raise click.UsageError("--allow-any runs anything: it cannot be combined with --allow")
    server = _check_server(server or config.server, insecure=insecure or config.insecure)
    token = _check_token(token or config.token)
    consent = ConsentSettings(
        trust_file=trust_path(path),
        server=server,
        session=_check_entries(allow),
        standing=_standing(config),
        allow_any=allow_any,
        refused_env=config.refused_env,
        ask=sys.stdin.isatty() and sys.stdout.isatty(),
        timeout_s=consent_timeout,
        command_options=_command_options(config_file, server, config),
    )
    options = RunOptions(
        capabilities=merge_capabilities(
            config.capabilities, _check_capabilities(capabilities), detected_capabilities()
        ),
        consent=consent,
        max_concurrent=max_concurrent,
        wait_ms=wait_ms,
        once=once,
        spool_dir=spool_dir_for(path),
    )
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
    slots = 1 if options.once else options.max_concurrent
    async with RunnerClient(server, token, max_wait_ms=options.wait_ms, slots=slots) as client:
        with StatusLine() as status:
            return await RunnerLoop(client, options, status).run()


@cli.command()
@config_option
def status(config_file: str | None) -> None:
    """Show what this runner is configured for (no network)."""
    path, config = _load(config_file)
    click.echo(f"config:       {path}{_file_note(path)}")
    if not config.token:
        click.echo(f"not paired:   run `{PAIR_HINT}`")
    click.echo(f"server:       {config.server or '(none)'}")
    if config.runner_id is not None:
        click.echo(
            f"runner:       {config.runner_id} “{clean(config.label)}” of {clean(config.owner)}"
        )
    click.echo(f"token:        {mask_token(config.token)}")
    click.echo(f"capabilities: {', '.join(config.capabilities) or '(none stored)'}")
    click.echo(f"detected:     {', '.join(detected_capabilities())}")
    click.echo(f"allow:        {_allowed(path, config)}")
    if config.refused_env:
        click.echo(f"refused env:  {', '.join(config.refused_env)} (besides the protocol's list)")
    click.echo(f"version:      {runnercli_version()} (protocol {PROTOCOL_VERSION})")
    if not config.token:
        sys.exit(EXIT_NOT_REPORTED)


def _allowed(path: Path, config: RunnerConfig) -> str:
    """The standing entries and the trust store's for the configured server."""
    entries = list(config.allow)
    if config.server:
        try:
            entries += TrustStore(trust_path(path), config.server).read().allow
        except TrustError as exc:
            return f"(trust store unreadable: {exc})"
    listed = ", ".join(dict.fromkeys(entries))
    then = "anything else: asked on a terminal, refused without one"
    return f"{listed}; {then}" if listed else f"nothing yet; {then}"


def _file_note(path: Path) -> str:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return " (missing)"
    note = f" (mode {mode:04o})"
    if os.name == "posix" and mode & 0o077:
        note += " — readable by others: chmod 600 it"
    return note


@cli.command()
@server_option
@token_option
@insecure_option
@config_option
def doctor(server: str | None, token: str | None, insecure: bool, config_file: str | None) -> None:
    """Check that the server answers and the token is valid."""
    path, config = _load(config_file)
    click.echo(f"config:  {path}{_file_note(path)}")
    server = _check_server(server or config.server, insecure=insecure or config.insecure)
    token = _check_token(token or config.token)
    click.echo(f"server:  {mcp_url(server)}")
    capabilities = merge_capabilities(config.capabilities, detected_capabilities())
    started = time.monotonic()
    hello = _hello_or_exit(server, token, capabilities)
    took = (time.monotonic() - started) * 1000
    click.echo(f"✓ server answers ({took:.0f} ms)")
    click.echo(
        f"✓ token valid: runner {hello.runner_id} “{clean(hello.label)}” of {clean(hello.owner)}"
    )
    click.echo(f"✓ protocol {PROTOCOL_VERSION} (server {hello.server_protocol})")
    click.echo(f"capabilities: {', '.join(capabilities)}")
    click.echo(f"allow:        {_allowed(path, config)}")
