"""The runner's MCP session, held by a task of its own: closing it never swallows a
cancellation of the task that closes it."""

from __future__ import annotations

import asyncio
import socket

import httpx2

from runnercli.client.mcp_session import McpSession


def test_a_task_cancelled_while_it_closes_a_session_ends_cancelled() -> None:
    """A session still opening (its server accepted the connection and says nothing) is
    closed by a task that is cancelled meanwhile, as a runner's stop cancels its tasks: that
    task ends cancelled, where closing had swallowed the cancellation and let it run on."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]

        async def scenario() -> tuple[bool, bool]:
            session = McpSession(
                f"http://127.0.0.1:{port}/mcp",
                {},
                httpx2.Timeout(30),
                httpx2.Limits(max_connections=4),
            )
            opening = asyncio.create_task(session.open())
            await asyncio.sleep(0.3)  # connected, waiting for an answer that never comes
            ran_on: list[bool] = []

            async def close_then_go_on() -> None:
                await session.close()
                ran_on.append(True)

            closing = asyncio.create_task(close_then_go_on())
            await asyncio.sleep(0.1)
            closing.cancel()
            await asyncio.wait([closing], timeout=10)
            cancelled = closing.cancelled()
            opening.cancel()
            await session.close()  # the session's own task, cancelled after its timeout
            await asyncio.wait([opening], timeout=10)
            return cancelled, bool(ran_on)

        assert asyncio.run(scenario()) == (True, False)
