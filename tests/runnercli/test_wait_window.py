"""The runner CLI long-polls as long as the server offers in `hello`, unless told less."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from mcp.server.mcpserver import MCPServer

from runnercli.protocol import MAX_WAIT_MS, Hello, Limits
from tests.live import runner_cli
from tests.runnercli.test_scripted_server import serving

pytestmark = pytest.mark.e2e


class OfferingServer:
    """Offers `max_wait_ms` in hello and records the `wait_ms` of every lease call."""

    def __init__(self, max_wait_ms: int) -> None:
        self.max_wait_ms = max_wait_ms
        self.waits: list[int] = []

    def app(self) -> Any:
        server: MCPServer = MCPServer("everdict")

        async def hello(protocol: int, capabilities: list[str], status: str = "") -> Hello:
            return Hello(
                runner_id=1,
                label="laptop",
                owner="alice",
                server_protocol=2,
                update_required=False,
                limits=Limits(max_wait_ms=self.max_wait_ms),
            )

        async def lease_job(
            protocol: int,
            wait_ms: int = 0,
            capabilities: list[str] | None = None,
            status: str = "",
            max_jobs: int | None = None,
        ) -> dict[str, Any]:
            self.waits.append(wait_ms)
            await asyncio.sleep(0.1)
            return {"job": None, "lease": None, "update_required": False, "jobs": []}

        server.add_tool(hello)
        server.add_tool(lease_job)
        # Not a fake of the project's server: the MCP SDK's own app, as a later release's.
        return server.streamable_http_app(stateless_http=True)

    def __call__(self, tmp_path: Path, *args: str) -> list[int]:
        """The waits asked for by `runnercli run` (with `args`) in its first lease calls."""
        with serving(self) as url:  # type: ignore[arg-type]  # serves any `app()`
            runner = runner_cli(tmp_path, ["run", "--server", url, "--token", "rnr_t", *args])
            try:
                deadline = time.monotonic() + 30
                while len(self.waits) < 2:
                    assert time.monotonic() < deadline, runner.output()
                    assert runner.popen.poll() is None, runner.output()
                    time.sleep(0.05)
            finally:
                runner.stop(signal.SIGTERM)
        return self.waits


def test_without_wait_ms_the_runner_waits_as_long_as_the_server_offers(tmp_path: Path) -> None:
    assert set(OfferingServer(MAX_WAIT_MS)(tmp_path)) == {55_000}
    assert set(OfferingServer(700)(tmp_path)) == {700}


def test_an_explicit_wait_ms_is_kept_within_the_offer(tmp_path: Path) -> None:
    assert set(OfferingServer(MAX_WAIT_MS)(tmp_path, "--wait-ms", "2000")) == {2000}
    assert set(OfferingServer(700)(tmp_path, "--wait-ms", "2000")) == {700}
