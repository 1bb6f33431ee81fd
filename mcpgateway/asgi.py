"""The ASGI app mounted at /mcp in the Channels router.

Daphne never sends ASGI lifespan events, so the SDK's session manager (whose task group
every MCP request runs in) is started here: lazily, on the first request, once per
process, in a task of its own that lives as long as the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from django.http.request import split_domain_port, validate_host
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from mcpgateway.server import MCP_PATH, allowed_hosts, build_app, build_server
from runners.presence import presence_writer

log = logging.getLogger(__name__)


def _route_path(scope: Scope) -> str:
    """The path below the mount point (ASGI paths include `root_path`)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


def host_allowed(scope: Scope) -> bool:
    host = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), "")
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed_hosts())


class McpGateway:
    """Serve /mcp (and /mcp/) with the MCP server's Streamable HTTP app."""

    def __init__(self) -> None:
        self._app: Starlette | None = None
        self._lock = asyncio.Lock()
        self._manager_task: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            raise ValueError(f"/mcp serves HTTP only, not {scope['type']!r}")
        app = await self._started_app()
        # The same host rule as every Django page (Django's wildcards included); the
        # transport repeats it for exact hosts and also checks the Origin header.
        if not host_allowed(scope):
            await Response("Invalid Host header", status_code=421)(scope, receive, send)
            return
        if _route_path(scope) != MCP_PATH:
            path = scope.get("root_path", "") + MCP_PATH
            scope = {**scope, "path": path, "raw_path": path.encode()}
        await app(scope, receive, send)

    async def _started_app(self) -> Starlette:
        if self._app is not None:
            return self._app
        async with self._lock:
            if self._app is None:
                server = build_server()
                app = build_app(server)
                await self._start_manager(server)
                presence_writer.ensure_started()
                self._app = app
        return self._app

    async def _start_manager(self, server: MCPServer) -> None:
        started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._manager_task = asyncio.get_running_loop().create_task(
            self._run_manager(server, started), name="mcp-session-manager"
        )
        await started

    async def _run_manager(self, server: MCPServer, started: asyncio.Future[None]) -> None:
        try:
            async with server.session_manager.run():
                started.set_result(None)
                # Parked for the life of the process: requests run in its task group.
                await asyncio.Event().wait()
        except Exception as exc:
            if not started.done():
                started.set_exception(exc)
            else:
                log.exception("MCP session manager stopped")
            raise


mcp_app = McpGateway()


async def _method_not_allowed(send: Send) -> None:
    body = b'{"detail": "GET is not served at /mcp: POST JSON-RPC requests."}'
    await send(
        {
            "type": "http.response.start",
            "status": 405,
            "headers": [
                (b"content-type", b"application/json"),
                (b"allow", b"POST, DELETE"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def route_mcp(fallback: Any) -> ASGIApp:
    """An HTTP app serving /mcp (and /mcp/) with the gateway and every other path with
    `fallback` (Django)."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if _route_path(scope) in (MCP_PATH, f"{MCP_PATH}/"):
            if scope.get("method") == "GET":
                # Stateless: no server-sent event stream is offered, so a GET is answered
                # at once rather than held open with nothing to say.
                await _method_not_allowed(send)
                return
            await mcp_app(scope, receive, send)
        else:
            await fallback(scope, receive, send)

    return app
