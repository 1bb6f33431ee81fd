"""`python -m runnercli services list | stop | prune`: the service topologies on this machine.

`list` shows each topology (the harness digest it serves, its runner, whether that runner
still runs, its containers and processes); `stop` removes topologies (all, or those whose
digest starts with what is given), live ones included — a runner using one notices, ends the
case using it as an error and starts it again for the next; `prune` removes only what runners
no longer running left (what `run` does when it starts).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import click

from runnercli.case.services import Found, Inventory, Records
from runnercli.case.services.engine import Engine
from runnercli.case.services.records import services_dir_for
from runnercli.config import config_path

config_option = click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="Config file ($EVERDICT_RUNNER_CONFIG; default ~/.config/everdict/runner.json).",
)


def _inventory(config_file: str | None) -> Inventory:
    return Inventory(Engine(), Records(services_dir_for(config_path(config_file))))


def _show(found: list[Found], inventory: Inventory) -> None:
    if inventory.docker_problem:
        click.echo(f"(containers not listed: {inventory.docker_problem})")
    if not found:
        click.echo("no service topologies")
        return
    for item in found:
        state = "live" if item.live else "left by a stopped runner"
        click.echo(f"{item.topology[:16]}  runner {item.runner}  ({state})")
        for service in item.services:
            click.echo(f"  {service}")
        if item.networks:
            click.echo(f"  network {', '.join(n.name for n in item.networks)}")


@click.group()
def services() -> None:
    """Show and remove the services runners keep warm on this machine."""


@services.command("list")
@config_option
def list_(config_file: str | None) -> None:
    """List the service topologies: containers, networks and processes."""
    inventory = _inventory(config_file)
    _show(asyncio.run(inventory.find()), inventory)


@services.command("stop")
@click.argument("digests", nargs=-1)
@config_option
def stop(digests: tuple[str, ...], config_file: str | None) -> None:
    """Remove topologies (every one, or those whose digest starts with DIGESTS)."""
    inventory = _inventory(config_file)

    async def go() -> int:
        found = await inventory.find()
        chosen = [f for f in found if not digests or f.topology.startswith(digests)]
        return await inventory.remove(chosen)

    count = asyncio.run(go())
    click.echo(f"✓ stopped {count} topolog{'y' if count == 1 else 'ies'}")


@services.command("prune")
@config_option
def prune(config_file: str | None) -> None:
    """Remove what runners that no longer run left: containers, networks, processes."""
    inventory = _inventory(config_file)
    gone = asyncio.run(inventory.remove_leftovers(None, tmp_root=Path(tempfile.gettempdir())))
    for item in gone:
        click.echo(f"removed {item.topology[:16]} of runner {item.runner}")
    click.echo(f"✓ pruned {len(gone)} topolog{'y' if len(gone) == 1 else 'ies'}")
