"""A long-poll stays silent for its whole window: the transport's pings start only past it."""

from __future__ import annotations

import inspect
import json
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp.server import _streamable_http_modern as modern

from everdict.processes import free_port, spawn
from mcpgateway.server import PING_AFTER_WINDOW_S, build_app, build_server
from runners.services import runner_pair
from tests.live import server_env, wait_http


def test_the_transport_pings_only_past_the_long_poll_window(settings: Any) -> None:
    settings.EVERDICT_MAX_WAIT_MS = 55_000
    build_app(build_server())
    assert modern._SSE_PING_INTERVAL == 55 + PING_AFTER_WINDOW_S
    # The constant set is the one the transport reads between its pings.
    assert "_SSE_PING_INTERVAL" in inspect.getsource(modern.handle_modern_request)


# The server's long-poll window, and the SDK's ping interval in that server: well inside the
# window, so a call left to the SDK's own interval would send a ping before its answer.
WINDOW_MS = 3_000
SDK_PING_S = 0.5
# Daphne as `make serve` runs it, the SDK's ping interval cut first. The SDK has no setting
# for it: the module constant the server raises is the one set (and must exist).
BOOT = """
import sys
from mcp.server import _streamable_http_modern as modern
assert isinstance(modern._SSE_PING_INTERVAL, float), "the SDK's ping interval has moved"
modern._SSE_PING_INTERVAL = float(sys.argv.pop(1))
from daphne.cli import CommandLineInterface
CommandLineInterface.entrypoint()
"""


@contextmanager
def daphne_pinging_every(ping_s: float, tmp_path: Path, **env: Any) -> Iterator[int]:
    port = free_port()
    args = [sys.executable, "-c", BOOT, str(ping_s), "-b", "127.0.0.1", "-p", str(port)]
    proc = spawn([*args, "everdict.asgi:application"], tmp_path / "daphne.log", server_env(**env))
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc=proc)
        yield port
    finally:
        proc.stop()


def raw_lease_job(port: int, token: str, wait_ms: int) -> tuple[float, bytes]:
    """One `lease_job` call on a bare socket: seconds until its first byte, and every byte."""
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "lease_job",
                "arguments": {"protocol": 3, "wait_ms": wait_ms},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
    ).encode()
    head = (
        f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {token}\r\n"
        "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
        "MCP-Protocol-Version: 2026-07-28\r\nMCP-Method: tools/call\r\nMCP-Name: lease_job\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=wait_ms / 1000 + 30) as sock:
        sock.sendall(head + body)
        asked = time.monotonic()
        received = sock.recv(1)
        first_byte_after = time.monotonic() - asked
        while chunk := sock.recv(65536):
            received += chunk
    return first_byte_after, received


@pytest.mark.e2e
@pytest.mark.once
def test_no_byte_of_a_long_poll_crosses_the_wire_before_its_answer(
    transactional_db: Any, alice: Any, tmp_path: Path
) -> None:
    token = runner_pair(owner=alice, label="laptop", capabilities=["python"]).token
    with daphne_pinging_every(SDK_PING_S, tmp_path, EVERDICT_MAX_WAIT_MS=WINDOW_MS) as port:
        first_byte_after, received = raw_lease_job(port, token, WINDOW_MS)

    # Silent for the window (the SDK alone would have sent its headers and a ping after
    # SDK_PING_S), then one JSON answer: no event stream, no ping.
    assert WINDOW_MS / 1000 - 0.3 <= first_byte_after < WINDOW_MS / 1000 + 5, received
    head, _, body = received.partition(b"\r\n\r\n")
    status, *headers = head.decode().split("\r\n")
    assert status.startswith("HTTP/1.1 200"), received
    assert "content-type: application/json" in [h.lower() for h in headers], headers
    assert b"ping" not in received and b"event:" not in received, received
    answer = json.loads(body)
    assert answer["id"] == 1
    assert answer["result"]["structuredContent"] == {
        "job": None,
        "lease": None,
        "update_required": False,
    }
