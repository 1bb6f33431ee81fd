"""`python -m runnercli status` and `doctor`: what this runner is configured for, and
whether the server answers it."""

from __future__ import annotations

import asyncio
import shutil
import sys
import time

import click

from runnercli.case.tools import probe
from runnercli.commands.common import (
    PAIR_HINT,
    allowed,
    check_server,
    check_token,
    config_option,
    file_note,
    hello_or_exit,
    insecure_option,
    load_config,
    server_option,
    token_option,
)
from runnercli.config import (
    detected_capabilities,
    mask_token,
    mcp_url,
    merge_capabilities,
    runnercli_version,
)
from runnercli.console.exits import EXIT_NOT_REPORTED
from runnercli.console.terminal import clean
from runnercli.laptop.state import report_lines, runner_report
from runnercli.laptop.updates import update_advice
from runnercli.protocol import PROTOCOL_VERSION
from runnercli.protocol.agents import AGENT_CLIS


@click.command()
@config_option
def status(config_file: str | None) -> None:
    """Show what this runner is configured for (no network)."""
    path, config = load_config(config_file)
    click.echo(f"config:       {path}{file_note(path)}")
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
    click.echo(f"allow:        {allowed(path, config)}")
    if config.refused_env:
        click.echo(f"refused env:  {', '.join(config.refused_env)} (besides the protocol's list)")
    click.echo(f"version:      {runnercli_version()} (protocol {PROTOCOL_VERSION})")
    # What the runner running with this config says of itself (its cases, the inhibitor,
    # a pause), written by it beside the config.
    for line in report_lines(runner_report(path)):
        click.echo(line)
    if not config.token:
        sys.exit(EXIT_NOT_REPORTED)


def agent_lines() -> list[str]:
    """Whether each agent CLI on this PATH is a version the project pinned and tested
    (`runnercli.protocol.agents`): one line each, nothing for one not installed."""

    async def versions() -> list[str]:
        return list(await asyncio.gather(*(probe(agent.tool) for agent in AGENT_CLIS)))

    installed = [agent for agent in AGENT_CLIS if shutil.which(agent.tool) is not None]
    if not installed:
        return []
    found = dict(zip([agent.tool for agent in AGENT_CLIS], asyncio.run(versions()), strict=True))
    lines = []
    for agent in installed:
        version = found[agent.tool]
        if version == agent.version:
            lines.append(f"✓ {agent.tool} {version}: the pinned version")
        else:
            lines.append(
                f"⚠ {agent.tool} {clean(version)}: not the pinned version {agent.version} "
                f"(install it with `npm install -g {agent.npm_spec}`)"
            )
    return lines


@click.command()
@server_option
@token_option
@insecure_option
@config_option
def doctor(server: str | None, token: str | None, insecure: bool, config_file: str | None) -> None:
    """Check that the server answers and the token is valid, and whether the agent CLIs on
    PATH (claude, codex) are the versions the runner was tested with."""
    path, config = load_config(config_file)
    click.echo(f"config:  {path}{file_note(path)}")
    server = check_server(server or config.server, insecure=insecure or config.insecure)
    token = check_token(token or config.token)
    click.echo(f"server:  {mcp_url(server)}")
    capabilities = merge_capabilities(config.capabilities, detected_capabilities())
    started = time.monotonic()
    hello = hello_or_exit(server, token, capabilities)
    took = (time.monotonic() - started) * 1000
    click.echo(f"✓ server answers ({took:.0f} ms)")
    click.echo(
        f"✓ token valid: runner {hello.runner_id} “{clean(hello.label)}” of {clean(hello.owner)}"
    )
    click.echo(f"✓ protocol {PROTOCOL_VERSION} (server {hello.server_protocol})")
    click.echo(f"capabilities: {', '.join(capabilities)}")
    click.echo(f"allow:        {allowed(path, config)}")
    for line in agent_lines():
        click.echo(line)
    advice = update_advice(hello.latest_runner_version)
    if advice is not None:
        click.echo(f"{'⬆' if advice.newer else '✓'} {advice.line()}")
