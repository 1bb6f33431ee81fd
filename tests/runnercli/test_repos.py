"""Repo names and the `repos` key of runner.json: what may be mapped, and to what."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest

from runnercli.case.repo import (
    MappingError,
    RepoNameError,
    check_repo_name,
    repo_add,
    repo_capabilities,
    repo_list,
    repo_path,
    repo_remove,
)
from runnercli.case.repo.mapping import config_data_load, config_data_save
from runnercli.config import config_load
from tests.runnercli.gitrepos import make_checkout


@pytest.mark.parametrize("name", ["acme/app", "a/b", "acme-corp/my_app.v2", "0/9", "o/" + "n" * 98])
def test_valid_repo_names(name: str) -> None:
    assert check_repo_name(name) == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("Acme/App", "must be lower case"),
        ("acme/my app", "contains white space"),
        ("acme/..", "may not contain '..'"),
        ("acme/a..b", "may not contain '..'"),
        ("acme", "must have exactly one '/'"),
        ("acme/app/x", "must have exactly one '/'"),
        ("/app", "has a part that is empty"),
        ("acme/", "has a part that is empty"),
        ("acme/.app", "starts with '.'"),
        ("acme/-app", "starts with '.', '_' or '-'"),
        ("acme/app$", "holds other characters"),
        ("acme/appé", "holds other characters"),
        ("", "is empty"),
        ("o/" + "n" * 99, "is longer than 100 characters"),
    ],
)
def test_a_malformed_repo_name_is_refused_saying_why(name: str, why: str) -> None:
    with pytest.raises(RepoNameError, match="expected OWNER/NAME") as refused:
        check_repo_name(name)
    assert why in str(refused.value)


def test_a_mapping_stores_the_checkouts_top_directory_and_gives_a_capability(
    tmp_path: Path,
) -> None:
    make_checkout(tmp_path / "app")
    make_checkout(tmp_path / "web")
    data: dict[str, Any] = {"server": "http://127.0.0.1:8000", "token": "rnr_x"}
    data = repo_add(data, "acme/web", tmp_path / "web")
    data = repo_add(data, "acme/app", tmp_path / "app" / "src")
    assert data["repos"] == {
        "acme/app": str((tmp_path / "app").resolve()),
        "acme/web": str((tmp_path / "web").resolve()),
    }
    assert data["token"] == "rnr_x"
    assert repo_capabilities(data) == ["repo:acme/app", "repo:acme/web"]
    assert repo_list(data) == sorted(data["repos"].items())
    assert repo_path(data, "acme/app") == (tmp_path / "app").resolve()
    remaining, was = repo_remove(data, "acme/app")
    assert was == str((tmp_path / "app").resolve())
    assert repo_capabilities(remaining) == ["repo:acme/web"]
    assert repo_remove(remaining, "acme/app") == (remaining, None)
    assert "acme/app" in data["repos"]  # the data passed in is not changed


def test_a_path_that_is_not_a_git_checkout_is_refused(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(MappingError) as plain:
        repo_add({}, "acme/app", tmp_path / "plain")
    assert str(plain.value) == f"not a git checkout: {tmp_path / 'plain'}"
    with pytest.raises(MappingError) as missing:
        repo_add({}, "acme/app", tmp_path / "missing")
    assert str(missing.value) == f"not a git checkout: {tmp_path / 'missing'} (no such directory)"
    with pytest.raises(RepoNameError):
        repo_add({}, "Acme/App", tmp_path)


def test_an_unmapped_name_says_the_command_that_maps_it() -> None:
    with pytest.raises(MappingError, match=r"`python -m runnercli repo add acme/app PATH`"):
        repo_path({"repos": {}}, "acme/app")


def test_a_broken_repos_key_is_an_error() -> None:
    for broken in ({"repos": ["acme/app"]}, {"repos": {"acme/app": 3}}):
        with pytest.raises(MappingError, match='"repos" must map repo names to paths'):
            repo_list(broken)
    with pytest.raises(RepoNameError):
        repo_list({"repos": {"Bad Name": "/x"}})


def test_the_config_file_keeps_every_other_key_and_stays_private(tmp_path: Path) -> None:
    path = tmp_path / "everdict" / "runner.json"
    make_checkout(tmp_path / "app")
    assert config_data_load(path) == {}
    config_data_save(path, {"server": "http://127.0.0.1:8000", "token": "rnr_secret"})
    config_data_save(path, repo_add(config_data_load(path), "acme/app", tmp_path / "app"))
    stored = json.loads(path.read_text())
    assert stored["token"] == "rnr_secret"
    assert stored["repos"] == {"acme/app": str((tmp_path / "app").resolve())}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert config_load(path).token == "rnr_secret"
