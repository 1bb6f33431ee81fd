"""The runner CLI long-polls as long as the server offers in `hello`, unless told less."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from runnercli.protocol import MAX_WAIT_MS
from tests.live import runner_cli
from tests.runnercli.fake_server import TOKEN, fake_server

pytestmark = pytest.mark.e2e


def waits_asked(tmp_path: Path, offered: int, *args: str) -> set[int]:
    """The `wait_ms` of the first lease calls of `runnercli run` (with `args`) against a
    server offering `offered` in hello."""
    with fake_server(max_wait_ms=offered) as fake:
        runner = runner_cli(tmp_path, ["run", "--server", fake.url, "--token", TOKEN, *args])
        try:
            fake.wait(lambda: runner.popen.poll() is not None or len(fake.waits) >= 2, 30)
            assert runner.popen.poll() is None, runner.output()
        finally:
            runner.stop(signal.SIGTERM)
        return set(fake.waits)


def test_without_wait_ms_the_runner_waits_as_long_as_the_server_offers(tmp_path: Path) -> None:
    assert waits_asked(tmp_path, MAX_WAIT_MS) == {55_000}
    assert waits_asked(tmp_path, 700) == {700}


def test_an_explicit_wait_ms_is_kept_within_the_offer(tmp_path: Path) -> None:
    assert waits_asked(tmp_path, MAX_WAIT_MS, "--wait-ms", "2000") == {2000}
    assert waits_asked(tmp_path, 700, "--wait-ms", "2000") == {700}
