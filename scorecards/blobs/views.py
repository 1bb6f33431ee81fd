"""`/uploads/<token>`: the bytes of a raw upload (`scorecards.blobs.rawput`).

Outside `/api/` (which refuses runner tokens): the runner's bearer token and the signed
token of the URL both. Async: the server reads each chunk's body before the view sees it, and
the view holds no thread while it waits; each database or storage step runs off the event
loop on the loop's pool of threads, one short call per request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

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


def _read_body(request: HttpRequest, expected: int) -> bytes:
    """The body in one read (the server holds it whole already); one byte more than
    expected is enough to tell it is long."""
    return request.read(expected + 1)


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
    data = _read_body(request, expected)
    if len(data) != expected:
        await _in_thread(upload_drop)(bearer, claims)
        word = "longer" if len(data) > expected else "shorter"
        return _refused(
            UploadRefusal(
                400,
                f"the body is {word} than Content-Range {header!r} says ({expected} bytes): "
                "nothing of this upload is kept",
            )
        )
    offset, committed = await _in_thread(upload_chunk)(bearer, claims, first, data)
    return _state(offset, committed, status=201 if committed else 200)
