"""What the runner's commands share: their options, and checking what they were given."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from pathlib import Path

import click

from runnercli.case.consent.trust import Entry, TrustError, TrustStore, parse_entries
from runnercli.case.repo.mapping import REPOS_KEY, MappingError, repos_of
from runnercli.client import RevokedError, RunnerClient, ServerUnavailable, ToolCallError
from runnercli.config import (
    SERVER_ENV,
    TOKEN_ENV,
    ConfigError,
    RunnerConfig,
    config_load,
    config_path,
    invalid_capabilities,
    is_loopback,
    trust_path,
)
from runnercli.console.exits import EXIT_NOT_REPORTED, EXIT_REVOKED, EXIT_UPDATE_REQUIRED
from runnercli.console.terminal import clean
from runnercli.laptop.updates import upgrade_message
from runnercli.protocol import PROTOCOL_VERSION, Hello, RepoNameError
from runnercli.text.redact import RedactError, Redactor

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


def load_config(config_file: str | None) -> tuple[Path, RunnerConfig]:
    path = config_path(config_file)
    try:
        return path, config_load(path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


def check_redact(path: Path, config: RunnerConfig) -> Redactor:
    """The config's `redact` patterns, each checked before anything runs."""
    try:
        return Redactor(config.redact)
    except RedactError as exc:
        raise click.ClickException(f"{path}: {exc}") from exc


def check_repos(path: Path, config: RunnerConfig) -> dict[str, str]:
    """The config's mapped repos (`repo add`), their names checked."""
    try:
        return repos_of({REPOS_KEY: config.repos})
    except (MappingError, RepoNameError) as exc:
        raise click.ClickException(f"{path}: {exc}") from exc


def check_server(server: str | None, *, insecure: bool = False) -> str:
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


def check_entries(entries: tuple[str, ...]) -> list[Entry]:
    try:
        return parse_entries(entries)
    except TrustError as exc:
        raise click.BadParameter(str(exc), param_hint="--allow") from exc


def check_token(token: str | None) -> str:
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


def check_capabilities(capabilities: tuple[str, ...]) -> list[str]:
    if bad := invalid_capabilities(capabilities):
        raise click.BadParameter(
            f"{', '.join(bad)}: a capability is [a-z0-9][a-z0-9._-]{{0,39}}",
            param_hint="--capability",
        )
    return list(capabilities)


async def _hello(server: str, token: str, capabilities: list[str]) -> Hello:
    async with RunnerClient(server, token) as client:
        return await client.hello(capabilities=capabilities, status="idle")


def hello_or_exit(server: str, token: str, capabilities: list[str]) -> Hello:
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
        click.echo(f"✗ {upgrade_message(PROTOCOL_VERSION)}", err=True)
        sys.exit(EXIT_UPDATE_REQUIRED)
    return hello


def allowed(path: Path, config: RunnerConfig) -> str:
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


def file_note(path: Path) -> str:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return " (missing)"
    note = f" (mode {mode:04o})"
    if os.name == "posix" and mode & 0o077:
        note += " — readable by others: chmod 600 it"
    return note
