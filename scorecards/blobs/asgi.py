"""`/uploads/<token>`: the bytes of a raw upload (`scorecards.blobs.rawput`), served by an ASGI
app of its own in front of Django.

Outside `/api/` (which refuses runner tokens): the runner's bearer token and the signed token
of the URL both. A `PUT` is let in before its body is kept (the token, the fence, where the
upload stands: one call off the event loop; a first chunk's body is received meanwhile, its
digest starting afresh whatever the check finds). The body is read from the ASGI channel
straight into the file it is kept in, hashed as it is written on the loop's pool of threads
(a MiB, then all that came while the piece before was written): no Django request, no
spooled copy. The chunk is then kept (one more call: moved into place, recorded, the file
closed). Each database or storage step runs on the loop's pool of threads, as the MCP tools
do.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, TypeVar

from channels.db import database_sync_to_async

from scorecards.blobs.rawput import (
    UPLOAD_PATH,
    Opened,
    UploadClaims,
    UploadRefusal,
    content_range,
    runner_of,
    upload_abandon,
    upload_claims,
    upload_drop,
    upload_open,
    upload_state,
    upload_take,
)
from scorecards.blobs.receiving import Received

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
T = TypeVar("T")

# Bytes of the body gathered before they are handed to a thread to be hashed and written
# (more when the piece before is still being written).
WRITE_PIECE = 1 << 20


def route_uploads(app: App) -> App:
    """`/uploads/…` to the upload app; every other request to `app`."""

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(UPLOAD_PATH):
            await upload_app(scope, receive, send)
        else:
            await app(scope, receive, send)

    return route


def _in_thread(fn: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """`fn` on the loop's pool of threads (as the MCP tools run), its connections closed
    when old."""
    return database_sync_to_async(fn, thread_sensitive=False)


def _headers(scope: Scope) -> dict[str, str]:
    return {
        name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]
    }


def _bearer(headers: dict[str, str]) -> str:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


async def _reply(
    send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> None:
    raw = json.dumps(body).encode()
    listed = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(raw)).encode()),
        *((name.encode(), value.encode()) for name, value in (headers or {}).items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": listed})
    await send({"type": "http.response.body", "body": raw})


async def _state(send: Send, offset: int, committed: bool, status: int = 200) -> None:
    await _reply(
        send,
        status,
        {"offset": offset, "committed": committed},
        {"Upload-Offset": str(offset), "Upload-Complete": "?1" if committed else "?0"},
    )


async def upload_app(scope: Scope, receive: Receive, send: Send) -> None:
    """`PUT` one chunk (`Content-Range: bytes a-b/size`); `HEAD`/`GET`: where it stands."""
    headers = _headers(scope)
    method = scope["method"]
    try:
        claims = upload_claims(scope["path"].removeprefix(UPLOAD_PATH))
        bearer = _bearer(headers)
        if method in ("HEAD", "GET"):
            offset, committed = await _in_thread(_state_of)(bearer, claims)
            await _state(send, offset, committed)
        elif method == "PUT":
            await _put(receive, send, headers, bearer, claims)
        else:
            body = {"detail": "PUT a chunk, or HEAD for the offset"}
            await _reply(send, 405, body, {"Allow": "PUT, HEAD, GET"})
    except UploadRefusal as refusal:
        await _reply(send, refusal.status, {"detail": refusal.reason})


def _state_of(bearer: str, claims: UploadClaims) -> tuple[int, bool]:
    return upload_state(runner_of(bearer), claims)


def _drop(bearer: str, claims: UploadClaims) -> None:
    upload_drop(runner_of(bearer), claims)


async def _put(
    receive: Receive, send: Send, headers: dict[str, str], bearer: str, claims: UploadClaims
) -> None:
    header = headers.get("content-range", "")
    if not header:
        raise UploadRefusal(400, "Content-Range: bytes first-last/size is required")
    try:
        first, last = content_range(header, claims.size)
    except UploadRefusal as refusal:
        if refusal.status == 416:
            await _in_thread(_drop)(bearer, claims)
        raise
    expected = last - first + 1
    opening = asyncio.ensure_future(_in_thread(upload_open)(bearer, claims, first, expected))
    received: Received | None = None
    try:
        if first == 0:
            # A first chunk's digest starts afresh whatever the upload holds: its body is
            # received while the request is let in (and removed if it is not).
            received = Received(hashlib.sha256())
            length = await _read_body(receive, received, expected)
            opened: Opened = await opening
            if opened.held is not None:
                received.close()
                received = None
        else:
            opened = await opening
            received = Received(opened.digest) if opened.held is None else None
            length = await _read_body(receive, received, expected)
        if length is None:
            return  # the client went away: nothing to answer
        if length != expected:
            await _in_thread(upload_abandon)(claims, opened)
            word = "longer" if length > expected else "shorter"
            raise UploadRefusal(
                400,
                f"the body is {word} than Content-Range {header!r} says ({expected} bytes): "
                "nothing of this upload is kept",
            )
        if received is None:
            assert opened.held is not None
            offset, committed = opened.held
        else:
            # The file is closed in the same hop as it is kept.
            offset, committed = await _in_thread(upload_take)(claims, opened, first, received)
    finally:
        if not opening.done():
            await asyncio.wait([opening])
        opening.exception()  # looked at: a refusal once the client left answers no one
        if received is not None and not received.closed:
            await asyncio.get_running_loop().run_in_executor(None, received.close)
    await _state(send, offset, committed, status=201 if committed else 200)


async def _read_body(receive: Receive, into: Received | None, expected: int) -> int | None:
    """Read the request's body into `into` (at most `expected` bytes of it are written); its
    length, or None when the client went away. What is gathered is hashed and written on the
    loop's pool of threads: a MiB first, then whatever came while the piece before was
    written (daphne hands a body over whole, in 8 KiB messages: two hops for it, not one a
    MiB)."""
    loop = asyncio.get_running_loop()
    writing: asyncio.Future[None] | None = None
    gathered: list[bytes] = []
    size = total = 0
    more = True
    try:
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body = message.get("body", b"")
            more = bool(message.get("more_body", False))
            total += len(body)
            if into is None or total > expected:
                continue
            if body:
                gathered.append(body)
                size += len(body)
            idle = writing is None or writing.done()
            if gathered and (not more or (size >= WRITE_PIECE and idle)):
                if writing is not None:
                    await writing
                writing = loop.run_in_executor(None, into.write_pieces, gathered)
                gathered, size = [], 0
    finally:
        if writing is not None:
            await writing
    return total
