"""A server can lie: what the runner refuses whatever the server says.

The server here is a test double of the wire (`fake_server`: the MCP SDK's server handing out
raw jobs); the runner is the real CLI, as a process.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from runnercli.config import RunnerConfig, config_save
from tests.live import Proc, runner_cli
from tests.runnercli.fake_server import TOKEN, FakeServer, fake_server, wire_job, writer

pytestmark = [pytest.mark.e2e, pytest.mark.once]

# Each name the design refuses, and examples of each refused prefix (LD_*, DYLD_*,
# GIT_CONFIG*), written here rather than read from the code under test.
REFUSED_KEYS = [
    "PATH",
    "HOME",
    "USER",
    "SHELL",
    "IFS",
    "BASH_ENV",
    "ENV",
    "PROMPT_COMMAND",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONUSERBASE",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PERL5LIB",
    "PERL5OPT",
    "RUBYOPT",
    "RUBYLIB",
    "GIT_EXEC_PATH",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "DYLD_INSERT_LIBRARIES",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "Path",  # Windows reads it as PATH
]


def start(tmp_path: Path, server: FakeServer, *args: str, allow_any: bool = False) -> Proc:
    return runner_cli(
        tmp_path,
        ["run", "--server", server.url, "--token", TOKEN, "--wait-ms", "300", *args],
        allow_any=allow_any,
    )


def test_a_pinned_version_arriving_with_another_digest_is_refused(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    with fake_server() as server:
        allowed = runner_cli(tmp_path, ["allow", "--server", server.url, "acme/writer@1"])
        assert allowed.popen.wait(30) == 0, allowed.output()
        honest = wire_job(1, writer(first))
        # The same version, other content, with the digest of that other content.
        server.add(honest, wire_job(2, writer(second)))
        runner = start(tmp_path, server)
        try:
            server.wait(lambda: server.answered() == {1, 2})
        finally:
            runner.stop(signal.SIGTERM)
    assert first.exists()
    assert not second.exists()
    refusal = server.failure(2)
    assert refusal["retryable"] is False
    assert "harness acme/writer@1 was pinned to sha256:" in refusal["message"]
    assert "a version never changes on the server" in refusal["message"]
    store = json.loads((tmp_path / "trust.json").read_text())
    assert store["servers"][server.url]["pins"] == {"acme/writer@1": honest["harness"]["digest"]}
    assert "✗ refused: harness acme/writer@1 was pinned" in runner.output()


def test_a_job_whose_content_does_not_match_its_digest_is_refused(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    with fake_server() as server:
        server.add(wire_job(1, writer(marker), digest="0" * 64))
        runner = start(tmp_path, server, allow_any=True)
        try:
            server.wait(lambda: server.answered() == {1})
        finally:
            runner.stop(signal.SIGTERM)
    assert not marker.exists()
    message = server.failure(1)["message"]
    assert "arrived with content that does not match its digest" in message


def test_refused_environment_keys_sent_anyway_are_refused_by_the_runner(tmp_path: Path) -> None:
    config_save(tmp_path / "runner.json", RunnerConfig(refused_env=["MY_SECRET", "AWS_*"]))
    keys = [*REFUSED_KEYS, "MY_SECRET", "AWS_SESSION_TOKEN"]
    markers = {key: tmp_path / f"ran-{key}" for key in keys}
    harmless = tmp_path / "ran-harmless"
    with fake_server() as server:
        server.add(
            *(
                wire_job(i, writer(markers[key]), env={key: "x"}, name=f"env{i}")
                for i, key in enumerate(keys, start=1)
            ),
            wire_job(100, writer(harmless), env={"PYTHONUNBUFFERED": "1", "NO_COLOR": "1"}),
        )
        runner = start(tmp_path, server, allow_any=True)  # hygiene is not consent
        try:
            server.wait(lambda: len(server.answered()) == len(keys) + 1)
        finally:
            runner.stop(signal.SIGTERM)
    for i, key in enumerate(keys, start=1):
        assert not markers[key].exists(), key
        message = server.failure(i)["message"]
        assert f"sets {key} in its environment, which this runner refuses" in message, message
    assert harmless.exists()
    assert [r["job_id"] for r in server.results] == [100]


def test_pair_allow_goes_to_the_trust_store_of_that_server(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    with fake_server() as server:
        paired = runner_cli(
            tmp_path, ["pair", "--server", server.url, "--token", TOKEN, "--allow", "acme/writer"]
        )
        assert paired.popen.wait(30) == 0, paired.output()
        server.add(wire_job(1, writer(marker)))
        runner = start(tmp_path, server)
        try:
            server.wait(lambda: server.answered() == {1})
        finally:
            runner.stop(signal.SIGTERM)
    assert marker.exists()
    store = json.loads((tmp_path / "trust.json").read_text())["servers"][server.url]
    assert store["allow"] == ["acme/writer"]
    assert list(store["pins"]) == ["acme/writer@1"]
