"""One MCP session, held open by a task of its own.

The SDK ends a whole session when one of its HTTP requests fails at the transport level
(connection refused, reset, read timeout): holding it in its own task turns that death into
a retryable error for the calls in flight instead of cancelling the workers, and the next
call opens a new session.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation

from runnercli.config import runnercli_version
from runnercli.tasks import cancel_and_wait

CLOSE_TIMEOUT_S = 5.0


class McpSession:
    """One MCP session, entered and exited by its own task."""

    def __init__(self, url: str, headers: dict[str, str], timeout: httpx2.Timeout, limits: Any):
        self.url = url
        self.headers = headers
        self.timeout = timeout
        self.limits = limits
        self.client: Client | None = None
        self.error: BaseException | None = None
        self.dead = False
        self.ready = asyncio.Event()
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.response_hooks: list[Any] = []

    async def open(self) -> None:
        self._task = asyncio.create_task(self._hold(), name="mcp-session")
        await self.ready.wait()

    async def _hold(self) -> None:
        try:
            http = httpx2.AsyncClient(
                headers=self.headers,
                timeout=self.timeout,
                limits=self.limits,
                event_hooks={"response": self.response_hooks},
            )
            transport = streamable_http_client(self.url, http_client=http)
            info = Implementation(name="everdict-runner", version=runnercli_version())
            async with http, Client(transport, client_info=info) as client:
                # Every reply is read by the runner's own models (`runnercli.protocol`,
                # each lease grant on its own); the SDK's second pass over it against the
                # tool's JSON Schema — and the `tools/list` call it needs first — is skipped.
                client.session.validate_tool_result = _read_by_our_models  # type: ignore[method-assign]
                self.client = client
                self.ready.set()
                await self._closing.wait()
        except Exception as exc:
            self.error = exc
        finally:
            self.dead = True
            self.client = None
            self.ready.set()

    async def close(self) -> None:
        """Let the session's task leave its session, cancelled if it takes longer than
        CLOSE_TIMEOUT_S; a cancellation of the caller meanwhile still ends the caller."""
        self._closing.set()
        if self._task is not None and not self._task.done():
            done, _ = await asyncio.wait([self._task], timeout=CLOSE_TIMEOUT_S)
            if not done:
                await cancel_and_wait(self._task)


async def _read_by_our_models(name: str, result: Any) -> None:
    """The runner parses each tool's reply with its wire models: nothing to check twice."""
