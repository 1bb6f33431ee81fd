"""`repo add NAME PATH` / `repo list` / `repo remove NAME`, in-process and as a real process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from runnercli.commands.repo import repo
from tests.runnercli.gitrepos import make_checkout

# The group is registered on the main command by the CLI; this runs it as its own program.
AS_PROGRAM = "from runnercli.commands.repo import repo; repo(prog_name='repo')"


def test_add_list_and_remove_through_the_group(tmp_path: Path) -> None:
    config = tmp_path / "runner.json"
    config.write_text(json.dumps({"server": "http://127.0.0.1:8000", "token": "rnr_x"}))
    make_checkout(tmp_path / "app")
    cli = CliRunner()

    added = cli.invoke(
        repo, ["add", "acme/app", str(tmp_path / "app" / "src"), "--config", str(config)]
    )
    assert added.exit_code == 0, added.output
    top = (tmp_path / "app").resolve()
    assert f"✓ acme/app → {top}" in added.output
    assert "capability repo:acme/app" in added.output
    assert json.loads(config.read_text())["token"] == "rnr_x"

    listed = cli.invoke(repo, ["list", "--config", str(config)])
    assert listed.exit_code == 0
    assert f"acme/app  {top}\n" in listed.output

    removed = cli.invoke(repo, ["remove", "acme/app", "--config", str(config)])
    assert removed.exit_code == 0
    assert f"✓ acme/app is no longer mapped (was {top})" in removed.output
    assert json.loads(config.read_text())["repos"] == {}
    empty = cli.invoke(repo, ["list", "--config", str(config)])
    assert "no repos mapped: python -m runnercli repo add OWNER/NAME PATH" in empty.output


def test_the_group_refuses_bad_names_paths_and_unknown_repos(tmp_path: Path) -> None:
    config = tmp_path / "runner.json"
    (tmp_path / "plain").mkdir()
    cli = CliRunner()
    bad_name = cli.invoke(repo, ["add", "Acme/App", str(tmp_path), "--config", str(config)])
    assert bad_name.exit_code == 2
    assert "must be lower case" in bad_name.output
    not_git = cli.invoke(
        repo, ["add", "acme/app", str(tmp_path / "plain"), "--config", str(config)]
    )
    assert not_git.exit_code == 1
    assert f"not a git checkout: {tmp_path / 'plain'}" in not_git.output
    unknown = cli.invoke(repo, ["remove", "acme/app", "--config", str(config)])
    assert unknown.exit_code == 1
    assert "acme/app is not mapped" in unknown.output
    assert not config.exists()


def test_list_says_when_a_mapped_checkout_is_gone(tmp_path: Path) -> None:
    config = tmp_path / "runner.json"
    config.write_text(json.dumps({"repos": {"acme/app": str(tmp_path / "gone")}}))
    listed = CliRunner().invoke(repo, ["list", "--config", str(config)])
    assert f"acme/app  {tmp_path / 'gone'}  (not a git checkout any more)" in listed.output


def test_the_group_as_a_real_process_reads_the_config_from_the_environment(
    tmp_path: Path,
) -> None:
    config = tmp_path / "runner.json"
    make_checkout(tmp_path / "app")
    env_run = {"EVERDICT_RUNNER_CONFIG": str(config), "PATH": "/usr/bin:/bin"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", AS_PROGRAM, *args],
            capture_output=True,
            text=True,
            env=env_run,
            timeout=60,
        )

    added = run("add", "acme/app", str(tmp_path / "app"))
    assert added.returncode == 0, added.stderr
    assert json.loads(config.read_text())["repos"] == {
        "acme/app": str((tmp_path / "app").resolve())
    }
    assert "acme/app  " in run("list").stdout
    refused = run("add", "acme/app", str(tmp_path))
    assert refused.returncode == 1
    assert f"not a git checkout: {tmp_path}" in refused.stderr
