"""Talking to /mcp as a runner does: a session, and the lease and result payloads."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any


@asynccontextmanager
async def mcp_session(
    url: str, token: str, *, read_timeout: float = 60, max_connections: int = 20
) -> AsyncIterator[Any]:
    """An MCP client session on `url`/mcp with a bearer token, as the runner CLI opens one."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(10, read=read_timeout),
        limits=httpx2.Limits(max_connections=max_connections),
    )
    transport = streamable_http_client(f"{url}/mcp", http_client=http)
    async with http, Client(transport) as client:
        yield client


def no_op_result() -> dict[str, Any]:
    return {"status": "completed", "exit_code": 0, "output": "", "duration_ms": 0}


def leased_jobs(structured: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The jobs a `lease_job` reply carries: each grant's job when batched (`jobs`), else the
    single `job`."""
    if not structured:
        return []
    if isinstance(structured.get("jobs"), list):
        grants = [g for g in structured["jobs"] if g]
        return [g["job"] if isinstance(g.get("job"), dict) else g for g in grants]
    job = structured.get("job")
    return [job] if job else []
