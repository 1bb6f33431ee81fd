"""`python -m runnercli repo add NAME PATH` / `repo list` / `repo remove NAME`: which local
checkout serves a workspace's repo name on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from runnercli.case.repo.git import GitError, git_sync
from runnercli.case.repo.mapping import (
    MappingError,
    config_data_load,
    config_data_save,
    repo_add,
    repo_list,
    repo_remove,
    repos_of,
)
from runnercli.config import ConfigError, config_path
from runnercli.console.terminal import clean
from runnercli.protocol.names import RepoNameError, repo_capability

config_option = click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    help="Config file ($EVERDICT_RUNNER_CONFIG; default ~/.config/everdict/runner.json).",
)


def _load(config_file: str | None) -> tuple[Path, dict[str, Any]]:
    path = config_path(config_file)
    try:
        data = config_data_load(path)
        repos_of(data)
    except (ConfigError, MappingError, RepoNameError) as exc:
        raise click.ClickException(f"{path}: {exc}") from exc
    return path, data


def _save(path: Path, data: dict[str, Any]) -> None:
    try:
        config_data_save(path, data)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from exc


@click.group()
def repo() -> None:
    """Map workspace repo names to checkouts on this machine (capability repo:NAME)."""


@repo.command("add")
@click.argument("name")
@click.argument("path", type=click.Path(file_okay=False))
@config_option
def add(name: str, path: str, config_file: str | None) -> None:
    """Map repo NAME (OWNER/NAME, as harnesses name it) to the git checkout at PATH.

    Cases of a harness with `repo: {name: NAME}` then run in a worktree of it; the checkout
    itself is never written to.
    """
    config, data = _load(config_file)
    try:
        updated = repo_add(data, name, path)
    except RepoNameError as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from exc
    except MappingError as exc:
        raise click.ClickException(str(exc)) from exc
    _save(config, updated)
    before, after = repos_of(data).get(name), repos_of(updated)[name]
    if before and before != after:
        click.echo(f"✓ {name} → {clean(after)} (was {clean(before)})")
    else:
        click.echo(f"✓ {name} → {clean(after)}")
    click.echo(f"  capability {repo_capability(name)}; config: {config}")


@repo.command("list")
@config_option
def list_(config_file: str | None) -> None:
    """List the mapped repos and whether each checkout is still there."""
    config, data = _load(config_file)
    mapped = repo_list(data)
    if not mapped:
        click.echo("no repos mapped: python -m runnercli repo add OWNER/NAME PATH")
        return
    for name, where in mapped:
        click.echo(f"{name}  {clean(where)}{_problem(where)}")
    click.echo(f"config: {config}")


def _problem(where: str) -> str:
    try:
        found = git_sync(where, "rev-parse", "--show-toplevel")
    except GitError as exc:
        return f"  ({exc})"
    return "" if found.returncode == 0 else "  (not a git checkout any more)"


@repo.command("remove")
@click.argument("name")
@config_option
def remove(name: str, config_file: str | None) -> None:
    """Forget the mapping of repo NAME (the checkout itself is left as it is)."""
    config, data = _load(config_file)
    updated, was = repo_remove(data, name)
    if was is None:
        raise click.ClickException(f"{name} is not mapped (`python -m runnercli repo list`)")
    _save(config, updated)
    click.echo(f"✓ {name} is no longer mapped (was {clean(was)})")
