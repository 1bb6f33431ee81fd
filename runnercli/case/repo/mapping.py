"""Which local checkout serves a workspace's repo name: the `repos` key of `runner.json`.

`python -m runnercli repo add acme/app ~/src/app` maps the name `acme/app` (the name a
harness's `repo.name` uses) to the top of that git checkout; each mapped repo gives the
runner the capability `repo:acme/app`. The functions here take and return the config's
JSON data (a dict), so the command line and the runner read and write the same file the same
way; `config_data_load` / `config_data_save` read and replace the file (0600) keeping every
other key as it is.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from runnercli.case.repo.git import GitError, git_sync
from runnercli.config import ConfigError, write_private
from runnercli.protocol.names import check_repo_name, repo_capability

REPOS_KEY = "repos"


class MappingError(Exception):
    """A mapping that cannot be made or read: not a checkout, a broken `repos` key."""


def repos_of(data: dict[str, Any]) -> dict[str, str]:
    """The mapped repos of a config's data (name → absolute path); raise MappingError when
    the key is not such a mapping."""
    repos = data.get(REPOS_KEY) or {}
    if not isinstance(repos, dict) or not all(
        isinstance(name, str) and isinstance(path, str) for name, path in repos.items()
    ):
        raise MappingError(f'"{REPOS_KEY}" must map repo names to paths')
    for name in repos:
        check_repo_name(name)
    return dict(repos)


def repo_capabilities(data: dict[str, Any]) -> list[str]:
    """`repo:NAME` for each mapped repo, in name order."""
    return [repo_capability(name) for name in sorted(repos_of(data))]


def checkout_root(path: str | os.PathLike[str]) -> Path:
    """The absolute top directory of the git checkout holding `path`; raise MappingError
    ("not a git checkout: PATH") otherwise."""
    given = Path(path).expanduser()
    if not given.is_dir():
        raise MappingError(f"not a git checkout: {given} (no such directory)")
    try:
        result = git_sync(given.resolve(), "rev-parse", "--show-toplevel")
    except GitError as exc:
        raise MappingError(str(exc)) from exc
    if result.returncode != 0 or not result.text:
        raise MappingError(f"not a git checkout: {given}")
    return Path(result.stdout.decode("utf-8", "surrogateescape").strip()).resolve()


def repo_add(data: dict[str, Any], name: str, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Return a copy of `data` mapping `name` to the checkout at `path` (its top directory)."""
    check_repo_name(name)
    root = checkout_root(path)
    repos = repos_of(data)
    repos[name] = str(root)
    return {**data, REPOS_KEY: dict(sorted(repos.items()))}


def repo_remove(data: dict[str, Any], name: str) -> tuple[dict[str, Any], str | None]:
    """Return a copy of `data` without `name`, and the path it was mapped to (None: unmapped)."""
    repos = repos_of(data)
    removed = repos.pop(name, None)
    return {**data, REPOS_KEY: repos}, removed


def repo_list(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The mapped repos as (name, path), in name order."""
    return sorted(repos_of(data).items())


def repo_path(data: dict[str, Any], name: str) -> Path:
    """The checkout mapped to `name`; raise MappingError naming the command that maps it."""
    repos = repos_of(data)
    if name not in repos:
        raise MappingError(
            f"repo {name} is not mapped on this machine: "
            f"run `python -m runnercli repo add {name} PATH`"
        )
    return Path(repos[name])


def config_data_load(path: Path) -> dict[str, Any]:
    """The config file's JSON object as it is (every key kept); a missing file is `{}`."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from exc
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"{path} is not a valid runner config: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a valid runner config: not a JSON object")
    return data


def config_data_save(path: Path, data: dict[str, Any]) -> None:
    """Replace the config file with `data` atomically, mode 0600."""
    write_private(path, json.dumps(data, indent=2, sort_keys=True) + "\n")
