"""Talk to a live server's /mcp the way any MCP client does: the official SDK over HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from tests.live import rest

__all__ = ["acall", "call", "error_text", "rest", "session", "structured"]


@asynccontextmanager
async def session(
    base_url: str, token: str | None, read_timeout: float = 60
) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    timeout = httpx2.Timeout(30, read=read_timeout)
    http = httpx2.AsyncClient(headers=headers, timeout=timeout)
    transport = streamable_http_client(f"{base_url}/mcp", http_client=http)
    async with http, Client(transport) as client:
        yield client


async def acall(
    base_url: str, token: str, tool: str, args: dict[str, Any] | None = None
) -> CallToolResult:
    async with session(base_url, token) as client:
        return await client.call_tool(tool, args or {})


def call(
    base_url: str, token: str, tool: str, args: dict[str, Any] | None = None
) -> CallToolResult:
    """One tool call in a session of its own, from synchronous test code."""
    return asyncio.run(acall(base_url, token, tool, args))


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, error_text(result)
    assert result.structured_content is not None
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)
