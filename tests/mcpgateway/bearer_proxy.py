"""A reverse proxy for tests that adds `Authorization: Bearer …` to every request it forwards:
for a client that cannot send the header itself (the MCP conformance suite has no option
for one), so that it meets the server exactly as a client holding a token would.

Everything else passes through as sent: the method, the path and query, every header but
the hop-by-hop ones — the Host and Origin headers included, so that the server's own
checks of them answer the client — the body, and the answer, streamed (server-sent events
arrive as they are written).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from everdict.processes import LOOPBACK, free_port

HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
    }
)
METHODS = ["GET", "POST", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD"]


def proxy_app(upstream: str, token: str) -> Starlette:
    """An app forwarding every request to `upstream` with the bearer `token` added (unless
    the request carries an Authorization header of its own)."""
    client = httpx2.AsyncClient(base_url=upstream, timeout=httpx2.Timeout(60, read=None))

    async def forward(request: Request) -> StreamingResponse:
        headers = [
            (name, value)
            for name, value in request.headers.raw
            if name.decode("latin-1").lower() not in HOP_BY_HOP
        ]
        if "authorization" not in request.headers:
            headers.append((b"authorization", f"Bearer {token}".encode()))
        sent = client.build_request(
            request.method,
            request.url.path,
            params=request.url.query.encode(),
            headers=headers,
            content=await request.body(),
        )
        answer = await client.send(sent, stream=True)
        return StreamingResponse(
            answer.aiter_raw(),
            status_code=answer.status_code,
            headers={k: v for k, v in answer.headers.items() if k.lower() not in HOP_BY_HOP},
            background=BackgroundTask(answer.aclose),
        )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with client:
            yield

    return Starlette(routes=[Route("/{path:path}", forward, methods=METHODS)], lifespan=lifespan)


@contextmanager
def bearer_proxy(upstream: str, token: str) -> Iterator[str]:
    """Serve the proxy on a free port of this machine, in a thread; its base URL."""
    port = free_port()
    config = uvicorn.Config(
        proxy_app(upstream, token), host=LOOPBACK, port=port, log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="bearer-proxy", daemon=True)
    thread.start()
    try:
        _wait_started(server, thread)
        yield f"http://{LOOPBACK}:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


def _wait_started(server: Any, thread: threading.Thread, timeout_s: float = 10) -> None:
    async def wait() -> None:
        async with asyncio.timeout(timeout_s):
            while not server.started:
                if not thread.is_alive():
                    raise RuntimeError("the bearer proxy did not start")
                await asyncio.sleep(0.02)

    asyncio.run(wait())
