"""`python -m runnercli drain [--wait [--timeout S]]`: ask the runner of a config to finish
what it holds and exit, as SIGTERM does; it finds the runner through its pidfile."""

from __future__ import annotations

import sys

import click

from runnercli.config import config_path
from runnercli.laptop.pidfile import Drain
from runnercli.laptop.pidfile import drain as drain_runner


@click.command()
@click.option("--wait", is_flag=True, help="Wait until the runner has exited.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=None,
    help="With --wait: give up waiting after this many seconds (exit 1).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="The config the runner runs with (default ~/.config/everdict/runner.json; "
    "$EVERDICT_RUNNER_CONFIG).",
)
def drain(wait: bool, timeout: float | None, config_file: str | None) -> None:
    """Ask the running runner to drain: finish the cases it holds, deliver their results,
    take no new case and exit 0."""
    outcome = drain_runner(config_path(config_file), wait=wait, timeout_s=timeout, echo=click.echo)
    if outcome in (Drain.NOT_RUNNING, Drain.STILL_RUNNING):
        sys.exit(1)
