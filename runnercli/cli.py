"""`python -m runnercli` / `everdict-runner`: pair this machine, run cases, check the setup.

Each command is a module of `runnercli.commands` (`submit`, for CI, is `runnercli.submit`;
`push`, a repo's harnesses and datasets, is `runnercli.push`).
"""

from __future__ import annotations

import click

from runnercli.commands import (
    check,
    drain,
    harness_services,
    login_service,
    pair,
    repo,
    run,
    trust,
)
from runnercli.config import runnercli_version
from runnercli.push.command import push
from runnercli.submit import submit


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(runnercli_version(), prog_name="everdict-runner")
def cli() -> None:
    """The Everdict runner: runs your workspace's evaluation cases on this machine."""


for command in (
    pair.pair,
    run.run,
    check.status,
    check.doctor,
    trust.allow,
    trust.pending_command,
    trust.trust,
    repo.repo,
    harness_services.services,
    login_service.service,
    drain.drain,
    push,
    submit,
):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="everdict-runner")
