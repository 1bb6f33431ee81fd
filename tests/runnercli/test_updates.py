"""Updates that say how: PEP 440 order (with and without `packaging`) and the command that
updates this runner the way it was installed. Installs are real dist-info directories."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path

import pytest

from runnercli.laptop import updates
from runnercli.laptop.updates import installed_version, is_newer, update_advice, update_command

ORDERED = [
    "0.9",
    "1.0.dev1",
    "1.0a1.dev2",
    "1.0a1",
    "1.0b2",
    "1.0rc1",
    "1.0",
    "1.0.post1",
    "1.0.1",
    "1.1",
    "1.10",
    "2.0",
]


@pytest.mark.parametrize(("older", "newer"), list(itertools.pairwise(ORDERED)))
def test_versions_are_ordered_as_pep_440_says(older: str, newer: str) -> None:
    assert is_newer(newer, older) is True
    assert is_newer(older, newer) is False
    assert updates._simple_key(newer) > updates._simple_key(older)  # type: ignore[operator]


def test_equal_and_unreadable_versions() -> None:
    assert is_newer("1.0", "1.0.0") is False
    assert updates._simple_key("1.0") == updates._simple_key("1.0.0")
    assert is_newer("tomorrow", "1.0") is None
    assert updates._simple_key("tomorrow") is None


def test_without_packaging_the_small_compare_decides(tmp_path: Path) -> None:
    # A fresh interpreter in which `packaging` cannot be imported, as in a bare install.
    code = (
        "import sys; sys.modules['packaging'] = None\n"
        "from runnercli.laptop.updates import is_newer\n"
        "print(is_newer('0.2.0', '0.1.9'), is_newer('1.0rc1', '1.0'), is_newer('x', '1'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert done.stdout == "True False None\n"


def dist(tmp_path: Path, direct_url: Mapping[str, object] | None) -> metadata.Distribution:
    info = tmp_path / "everdict-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: everdict\nVersion: 0.1.0\n")
    if direct_url is not None:
        (info / "direct_url.json").write_text(json.dumps(direct_url))
    return metadata.PathDistribution(info)


def command(tmp_path: Path, prefix: Path, direct_url: Mapping[str, object] | None = None) -> str:
    return update_command(
        prefix=str(prefix),
        executable=str(prefix / "bin/python"),
        env={},
        home=tmp_path / "home",
        dists=[dist(tmp_path, direct_url)],
    )


def test_a_pip_install_is_updated_by_its_own_interpreters_pip(tmp_path: Path) -> None:
    venv = tmp_path / "my venv"
    assert command(tmp_path, venv) == f"'{venv}/bin/python' -m pip install --upgrade everdict"


def test_a_pipx_install_is_updated_by_pipx(tmp_path: Path) -> None:
    venv = tmp_path / "home/.local/share/pipx/venvs/everdict"
    assert command(tmp_path, venv) == "pipx upgrade everdict"


def test_a_pipx_install_under_pipx_home_or_with_its_metadata_is_updated_by_pipx(
    tmp_path: Path,
) -> None:
    venv = tmp_path / "elsewhere/venvs/everdict"
    env = {"PIPX_HOME": str(tmp_path / "elsewhere")}
    found = update_command(prefix=str(venv), env=env, home=tmp_path, dists=[])
    assert found == "pipx upgrade everdict"
    other = tmp_path / "other"
    other.mkdir()
    (other / "pipx_metadata.json").write_text("{}")
    assert update_command(prefix=str(other), env={}, home=tmp_path, dists=[]) == (
        "pipx upgrade everdict"
    )


def test_a_uv_tool_is_updated_by_uv(tmp_path: Path) -> None:
    (tmp_path / "uv-receipt.toml").write_text("[tool]\n")
    assert update_command(prefix=str(tmp_path), env={}, home=tmp_path, dists=[]) == (
        "uv tool upgrade everdict"
    )


def test_an_editable_checkout_is_updated_by_git_pull_and_make_install(tmp_path: Path) -> None:
    url = {"url": "file:///home/m/src/my%20everdict", "dir_info": {"editable": True}}
    assert command(tmp_path, tmp_path / "venv", url) == (
        "cd '/home/m/src/my everdict' && git pull && make install"
    )
    built = {"url": "file:///home/m/src/everdict", "dir_info": {}}
    (tmp_path / "built").mkdir()
    assert command(tmp_path / "built", tmp_path / "venv", built).endswith(
        "-m pip install --upgrade everdict"
    )


def test_this_checkouts_own_install_is_editable() -> None:
    root = Path(__file__).resolve().parents[2]
    assert update_command() == f"cd {root} && git pull && make install"
    assert installed_version() == metadata.version("everdict")


def test_the_advice_names_the_newer_version_and_the_command() -> None:
    advice = update_advice("0.3.0", current="0.2.1", command="pipx upgrade everdict")
    assert advice is not None and advice.newer
    assert advice.line() == "everdict 0.3.0 is available (this is 0.2.1): pipx upgrade everdict"
    same = update_advice("0.2.1", current="0.2.1", command="pipx upgrade everdict")
    assert same is not None and not same.newer
    assert same.line() == "everdict 0.2.1 is the newest the server knows"
    assert update_advice(None, current="0.2.1") is None
    assert update_advice("soon", current="0.2.1") is None
