"""A runner token never crosses the network in clear unless the member says so."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from runnercli.cli import cli
from runnercli.config import is_loopback
from tests.live import runner_cli

pytestmark = pytest.mark.once


def this_machines_address() -> str:
    """An address of this machine that is not loopback (a route lookup; nothing is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            pytest.skip("this machine has no network address besides loopback")
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        pytest.skip("this machine has no network address besides loopback")
    return address


@contextmanager
def refusing_server(host: str) -> Iterator[str]:
    """A server on `host` answering 401 to everything (as to a revoked token)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            body = json.dumps({"error": "invalid_token"}).encode()
            self.send_response(401)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_DELETE = do_POST

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{host}:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_loopback_servers_are_this_machine() -> None:
    for url in ("http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:8000"):
        assert is_loopback(url), url
    for url in ("http://192.0.2.7:8000", "http://everdict.example", "http://127.0.0.1.nip.io"):
        assert not is_loopback(url), url


def test_plain_http_to_another_machine_is_refused_unless_insecure(tmp_path: Path) -> None:
    with refusing_server(this_machines_address()) as server:
        config = str(tmp_path / "runner.json")
        for command in ("pair", "doctor", "run"):
            args = [command, "--server", server, "--token", "rnr_x", "--config", config]
            refused = CliRunner().invoke(cli, args)
            assert refused.exit_code == 2, (command, refused.output)
            assert "is plain http:// to another machine" in refused.output
            assert "pass --insecure" in refused.output
        assert not Path(config).exists()
        doctor = CliRunner().invoke(
            cli,
            ["doctor", "--server", server, "--token", "rnr_x", "--insecure", "--config", config],
        )
        assert doctor.exit_code == 3, doctor.output  # it reached the server
        assert "this runner was revoked" in doctor.output
        run = runner_cli(tmp_path, ["run", "--server", server, "--token", "rnr_x", "--insecure"])
        assert run.popen.wait(30) == 3, run.output()
