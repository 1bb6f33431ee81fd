"""What `runner.json` keeps for `run` beside the pairing — mapped repos, `redact` patterns, keys
of later releases — and how `run` reads them: `pair` erases none, a bad pattern stops `run`
before it connects, a mapped repo is offered as a capability. Real CLI processes."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from click.testing import CliRunner

from runnercli.cli import cli
from tests.live import runner_cli
from tests.runnercli.fake_server import TOKEN, fake_server
from tests.runnercli.gitrepos import make_checkout


def test_pair_keeps_the_mapped_repos_the_redact_patterns_and_keys_it_does_not_know(
    tmp_path: Path,
) -> None:
    make_checkout(tmp_path / "app")
    config = tmp_path / "runner.json"
    added = runner_cli(tmp_path, ["repo", "add", "acme/app", str(tmp_path / "app")])
    assert added.popen.wait(30) == 0, added.output()
    data = json.loads(config.read_text())
    data.update({"redact": ["ghp_[A-Za-z0-9]{36}"], "from_a_later_release": {"x": 1}})
    config.write_text(json.dumps(data))

    with fake_server() as server:
        paired = runner_cli(tmp_path, ["pair", "--server", server.url, "--token", TOKEN])
        assert paired.popen.wait(30) == 0, paired.output()

    stored = json.loads(config.read_text())
    assert stored["token"] == TOKEN and stored["server"] == server.url
    assert stored["repos"] == {"acme/app": str((tmp_path / "app").resolve())}
    assert stored["redact"] == ["ghp_[A-Za-z0-9]{36}"]
    assert stored["from_a_later_release"] == {"x": 1}
    assert config.stat().st_mode & 0o777 == 0o600


def test_run_refuses_a_redact_pattern_re2_cannot_run_before_it_connects(tmp_path: Path) -> None:
    config = tmp_path / "runner.json"
    config.write_text(
        json.dumps(
            {
                "server": "http://127.0.0.1:9",
                "token": "rnr_x",
                "redact": ["ghp_[A-Za-z0-9]{36}", "(?<=secret=)\\w+"],
            }
        )
    )
    ran = CliRunner().invoke(cli, ["run", "--config", str(config), "--once"])
    assert ran.exit_code == 1
    assert f"{config}: redact pattern 2 '(?<=secret=)\\\\w+' is not an RE2 pattern" in ran.output
    assert "cannot reach server" not in ran.output

    config.write_text(json.dumps({"server": "http://127.0.0.1:9", "token": "x", "redact": "y"}))
    ran = CliRunner().invoke(cli, ["run", "--config", str(config), "--once"])
    assert ran.exit_code == 1
    assert "is not a valid runner config" in ran.output and "redact" in ran.output


def test_run_offers_each_mapped_repo_as_a_capability_and_says_what_stays_here(
    tmp_path: Path,
) -> None:
    make_checkout(tmp_path / "app")
    added = runner_cli(tmp_path, ["repo", "add", "acme/app", str(tmp_path / "app")])
    assert added.popen.wait(30) == 0, added.output()
    config = tmp_path / "runner.json"
    data = json.loads(config.read_text())
    config.write_text(json.dumps({**data, "redact": ["a+b", "c+d"]}))
    with fake_server() as server:
        runner = runner_cli(
            tmp_path,
            ["run", "--server", server.url, "--token", TOKEN, "--no-files", "--no-trace"],
        )
        try:
            server.wait(lambda: "connected to" in runner.output())
        finally:
            assert runner.stop(signal.SIGTERM) == 0, runner.output()
    greeting = next(line for line in runner.output().splitlines() if "connected to" in line)
    assert "repo:acme/app" in greeting.split("capabilities: ")[1].split(";")[0]
    assert "redacting what leaves with 2 patterns" in greeting
    assert "not sent: files, trace" in greeting


def test_repo_is_a_command_of_the_runner(tmp_path: Path) -> None:
    listed = runner_cli(tmp_path, ["repo", "list"])
    assert listed.popen.wait(30) == 0, listed.output()
    assert "no repos mapped: python -m runnercli repo add OWNER/NAME PATH" in listed.output()
