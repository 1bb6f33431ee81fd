"""The CLI where no Everdict server is needed: bad input, no server, a refused token."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from click.testing import CliRunner

from runnercli.cli import cli
from runnercli.config import RunnerConfig, config_save
from tests.live import Proc, free_port, runner_cli


def wait_for(proc: Proc, text: str, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        output = proc.output()
        if text in output:
            return output
        if proc.popen.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError(f"{text!r} never appeared; output:\n{proc.output()}")


@contextmanager
def http_stub(status: int) -> Iterator[str]:
    """A server answering every request with `status`, as a proxy or a revoking server would."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            body = json.dumps({"error": "invalid_token"}).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_pair_refuses_an_api_key_in_place_of_a_runner_token(tmp_path: Path) -> None:
    config = tmp_path / "runner.json"
    result = CliRunner().invoke(
        cli,
        ["pair", "--server", "http://127.0.0.1:9", "--token", "evk_x", "--config", str(config)],
    )
    assert result.exit_code == 2
    assert "that is an API key" in result.output
    assert not config.exists()


def test_pair_with_an_unreachable_server_stores_nothing(tmp_path: Path) -> None:
    config = tmp_path / "runner.json"
    server = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(
        cli, ["pair", "--server", server, "--token", "rnr_abc", "--config", str(config)]
    )
    assert result.exit_code == 1
    assert "cannot reach server" in result.output
    assert not config.exists()


def test_status_shows_the_pairing_without_the_token(tmp_path: Path) -> None:
    config = tmp_path / "runner.json"
    config_save(
        config,
        RunnerConfig(
            server="http://127.0.0.1:8000",
            token="rnr_supersecretvalue",
            runner_id=7,
            label="laptop",
            owner="alice",
            allow=["echo"],
        ),
    )
    result = CliRunner().invoke(cli, ["status", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "runner:       7 “laptop” of alice" in result.output
    assert "(mode 0600)" in result.output
    assert "allow:        echo" in result.output
    assert "rnr_supersecretvalue" not in result.output


def test_status_says_how_to_pair_when_not_paired(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["status", "--config", str(tmp_path / "none.json")])
    assert result.exit_code == 1
    assert "python -m runnercli pair --server URL --token rnr_…" in result.output


def test_doctor_and_run_exit_3_when_the_server_refuses_the_token(tmp_path: Path) -> None:
    with http_stub(401) as server:
        doctor = CliRunner().invoke(
            cli,
            ["doctor", "--server", server, "--token", "rnr_x", "--config", str(tmp_path / "c")],
        )
        assert doctor.exit_code == 3
        assert "this runner was revoked — pair again" in doctor.output
        proc = runner_cli(tmp_path, ["run", "--server", server, "--token", "rnr_x"])
        assert proc.popen.wait(20) == 3
    assert "this runner was revoked — pair again" in proc.output()


def test_run_retries_an_unreachable_server_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    server = f"http://127.0.0.1:{free_port()}"
    proc = runner_cli(tmp_path, ["run", "--server", server, "--token", "rnr_x"])
    try:
        wait_for(proc, "retrying in")
        output = wait_for(proc, "cannot reach server")
        assert "connection failed" in output
        started = time.monotonic()
        assert proc.stop(signal.SIGTERM) == 0
        assert time.monotonic() - started < 5
    finally:
        proc.stop(signal.SIGKILL)


def test_run_says_which_http_status_a_failing_server_answers(tmp_path: Path) -> None:
    with http_stub(502) as server:
        proc = runner_cli(tmp_path, ["run", "--server", server, "--token", "rnr_x"])
        try:
            output = wait_for(proc, "retrying in")
            assert "server answered HTTP 502" in output
            assert proc.stop(signal.SIGINT) == 0
        finally:
            proc.stop(signal.SIGKILL)
