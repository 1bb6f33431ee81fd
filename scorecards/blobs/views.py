"""`/uploads/<token>`: the bytes of a raw upload (`scorecards.blobs.rawput`).

Outside `/api/` (which refuses runner tokens): the runner's bearer token and the signed
token of the URL both. Async: the server reads each chunk's body before the view sees it
(spooled to a temporary file past `FILE_UPLOAD_MAX_MEMORY_SIZE`), and the view holds no
thread while it waits; each database or storage step runs off the event loop on the loop's
pool of threads, one short call per request. The body is handed on as that file, read a
piece at a time into the staging or the store while it is hashed: a chunk is never whole in
the server's memory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from typing import IO, Any, TypeVar

from channels.db import database_sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from runners.models import Runner
from runners.services import runner_authenticate
from scorecards.blobs.rawput import (
    UploadClaims,
    UploadRefusal,
    content_range,
    upload_chunk,
    upload_claims,
    upload_drop,
    upload_state,
)

T = TypeVar("T")


def _refused(refusal: UploadRefusal) -> JsonResponse:
    return JsonResponse({"detail": refusal.reason}, status=refusal.status)


def _state(offset: int, committed: bool, status: int = 200) -> JsonResponse:
    reply = JsonResponse({"offset": offset, "committed": committed}, status=status)
    reply["Upload-Offset"] = str(offset)
    reply["Upload-Complete"] = "?1" if committed else "?0"
    return reply


def _bearer(request: HttpRequest) -> str:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def _runner_then(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn(runner, ...)` after the bearer token is read as a runner (401 when it is not)."""

    def call(token: str, *args: Any) -> T:
        runner: Runner | None = runner_authenticate(token)
        if runner is None:
            raise UploadRefusal(401, "a runner's token is required (Authorization: Bearer rnr_…)")
        return fn(runner, *args)

    return call


def _in_thread(fn: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """`fn(runner, ...)` on the loop's pool of threads (as the MCP tools run): Django's
    "thread-sensitive" path gives each request a thread started for it."""
    return database_sync_to_async(_runner_then(fn), thread_sensitive=False)


# What one read of a body asks for when it must be copied.
BODY_PIECE = 1 << 20


def _body_file(request: HttpRequest) -> IO[bytes]:
    """The request's body as a seekable file at its first byte: the file the ASGI handler
    spooled it to, or (another handler) a copy made a piece at a time."""
    stream = getattr(request, "_stream", None)
    if stream is not None and not getattr(request, "_read_started", False):
        seekable = getattr(stream, "seekable", None)
        if seekable is not None and seekable():
            stream.seek(0)
            return stream  # type: ignore[no-any-return]
    copy = tempfile.SpooledTemporaryFile(max_size=BODY_PIECE)  # noqa: SIM115 (the view closes it)
    shutil.copyfileobj(request, copy, BODY_PIECE)
    copy.seek(0)
    return copy  # type: ignore[return-value]


def _length(body: IO[bytes]) -> int:
    size = body.seek(0, os.SEEK_END)
    body.seek(0)
    return size


@csrf_exempt
async def upload(request: HttpRequest, token: str) -> HttpResponse:
    """`PUT` one chunk (`Content-Range: bytes a-b/size`); `HEAD`/`GET`: where it stands."""
    try:
        claims = upload_claims(token)
        bearer = _bearer(request)
        if request.method in ("HEAD", "GET"):
            offset, committed = await _in_thread(upload_state)(bearer, claims)
            return _state(offset, committed)
        if request.method != "PUT":
            reply = JsonResponse({"detail": "PUT a chunk, or HEAD for the offset"}, status=405)
            reply["Allow"] = "PUT, HEAD, GET"
            return reply
        return await _put(request, bearer, claims)
    except UploadRefusal as refusal:
        return _refused(refusal)


async def _put(request: HttpRequest, bearer: str, claims: UploadClaims) -> HttpResponse:
    header = request.headers.get("Content-Range", "")
    if not header:
        return _refused(UploadRefusal(400, "Content-Range: bytes first-last/size is required"))
    try:
        first, last = content_range(header, claims.size)
    except UploadRefusal as refusal:
        if refusal.status == 416:
            await _in_thread(upload_drop)(bearer, claims)
        raise
    expected = last - first + 1
    body = _body_file(request)
    length = _length(body)
    if length != expected:
        await _in_thread(upload_drop)(bearer, claims)
        word = "longer" if length > expected else "shorter"
        return _refused(
            UploadRefusal(
                400,
                f"the body is {word} than Content-Range {header!r} says ({expected} bytes): "
                "nothing of this upload is kept",
            )
        )
    try:
        offset, committed = await _in_thread(upload_chunk)(bearer, claims, first, body)
    finally:
        body.close()
    return _state(offset, committed, status=201 if committed else 200)
