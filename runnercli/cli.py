"""`python -m runnercli` / `everdict-runner`: pair this machine, run cases, check the setup."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import time
from pathlib import Path

import click

from runnercli.client import RevokedError, RunnerClient, ServerUnavailable, ToolCallError
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
    mask_token,
    mcp_url,
    merge_capabilities,
    runnercli_version,
)
from runnercli.exits import EXIT_NOT_REPORTED, EXIT_REVOKED, EXIT_UPDATE_REQUIRED, UPGRADE_MESSAGE
from runnercli.loop import RunnerLoop, RunOptions
from runnercli.protocol import MAX_WAIT_MS, PROTOCOL_VERSION, Hello
from runnercli.spool import spool_dir_for
from runnercli.status import StatusLine

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
    help="Run only this harness (name, or name@version; repeatable). Others are refused.",
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(runnercli_version(), prog_name="everdict-runner")
def cli() -> None:
    """The Everdict runner: runs your workspace's evaluation cases on this machine."""


def main() -> None:
    cli(prog_name="everdict-runner")


def _load(config_file: str | None) -> tuple[Path, RunnerConfig]:
    path = config_path(config_file)
    try:
        return path, config_load(path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


def _check_server(server: str | None) -> str:
    if not server:
        raise click.UsageError(f"no server: pass --server URL or set ${SERVER_ENV}")
    if not server.startswith(("http://", "https://")):
        raise click.BadParameter(f"{server!r} is not an http(s) URL", param_hint="--server")
    return server.rstrip("/")


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
        click.echo(f"✗ cannot reach server: {exc}", err=True)
        sys.exit(EXIT_NOT_REPORTED)
    except ToolCallError as exc:
        click.echo(f"✗ the server refused this runner: {exc}", err=True)
        sys.exit(EXIT_NOT_REPORTED)
    if hello.update_required:
        click.echo(f"✗ {UPGRADE_MESSAGE.format(protocol=PROTOCOL_VERSION)}", err=True)
        sys.exit(EXIT_UPDATE_REQUIRED)
    return hello


@cli.command()
@server_option
@token_option
@capability_option
@allow_option
@config_option
def pair(
    server: str | None,
    token: str | None,
    capabilities: tuple[str, ...],
    allow: tuple[str, ...],
    config_file: str | None,
) -> None:
    """Check a runner token against the server and store it for `run`."""
    path, config = _load(config_file)
    server = _check_server(server)
    token = _check_token(token)
    extra = _check_capabilities(capabilities)
    hello = _hello_or_exit(server, token, merge_capabilities(extra, detected_capabilities()))
    config = config.model_copy(
        update={
            "server": server,
            "token": token,
            "runner_id": hello.runner_id,
            "label": hello.label,
            "owner": hello.owner,
            "capabilities": merge_capabilities(extra) if extra else config.capabilities,
            "allow": list(allow) if allow else config.allow,
        }
    )
    try:
        config_save(path, config)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(
        f"✓ paired with {server} as runner {hello.runner_id} “{hello.label}” of {hello.owner}"
    )
    click.echo(f"  config saved to {path} (mode 0600)")
    click.echo("  start it with: python -m runnercli run")


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
    default=25_000,
    show_default=True,
    help="How long one lease request waits for a job.",
)
@capability_option
@click.option("--once", is_flag=True, help="Wait for one job, run it, exit.")
@allow_option
@click.option(
    "--allow-any",
    is_flag=True,
    help="Run any harness the server sends, without asking (throwaway machines only).",
)
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
    config_file: str | None,
) -> None:
    """Pull jobs for this machine and run them until stopped (Ctrl-C drains, twice aborts)."""
    path, config = _load(config_file)
    server = _check_server(server or config.server)
    token = _check_token(token or config.token)
    options = RunOptions(
        capabilities=merge_capabilities(
            config.capabilities, _check_capabilities(capabilities), detected_capabilities()
        ),
        allow=merge_capabilities(config.allow, list(allow)),
        allow_any=allow_any,
        max_concurrent=max_concurrent,
        wait_ms=wait_ms,
        once=once,
        spool_dir=spool_dir_for(path),
    )
    sys.exit(asyncio.run(_run(server, token, options)))


async def _run(server: str, token: str, options: RunOptions) -> int:
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
        click.echo(f"runner:       {config.runner_id} “{config.label}” of {config.owner}")
    click.echo(f"token:        {mask_token(config.token)}")
    click.echo(f"capabilities: {', '.join(config.capabilities) or '(none stored)'}")
    click.echo(f"detected:     {', '.join(detected_capabilities())}")
    click.echo(f"allow:        {', '.join(config.allow) or 'any harness'}")
    click.echo(f"version:      {runnercli_version()} (protocol {PROTOCOL_VERSION})")
    if not config.token:
        sys.exit(EXIT_NOT_REPORTED)


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
@config_option
def doctor(server: str | None, token: str | None, config_file: str | None) -> None:
    """Check that the server answers and the token is valid."""
    path, config = _load(config_file)
    click.echo(f"config:  {path}{_file_note(path)}")
    server = _check_server(server or config.server)
    token = _check_token(token or config.token)
    click.echo(f"server:  {mcp_url(server)}")
    capabilities = merge_capabilities(config.capabilities, detected_capabilities())
    started = time.monotonic()
    hello = _hello_or_exit(server, token, capabilities)
    took = (time.monotonic() - started) * 1000
    click.echo(f"✓ server answers ({took:.0f} ms)")
    click.echo(f"✓ token valid: runner {hello.runner_id} “{hello.label}” of {hello.owner}")
    click.echo(f"✓ protocol {PROTOCOL_VERSION} (server {hello.server_protocol})")
    click.echo(f"capabilities: {', '.join(capabilities)}")
    click.echo(f"allow:        {', '.join(config.allow) or 'any harness'}")
