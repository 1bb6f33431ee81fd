"""A blob served as a file: plain text and raster images inline, anything else a download
(`Content-Disposition: attachment`); nothing sniffed, nothing allowed to run script on this
origin. What an artifact and a running case's file are both served as."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import PurePosixPath
from typing import IO

from asgiref.sync import sync_to_async
from django.http import FileResponse

from scorecards.blobs.models import Blob
from scorecards.blobs.store import blob_open

# Shown in the browser rather than downloaded: plain text and raster images, which cannot run
# script on the server's origin. Anything else (HTML, SVG, …) is an attachment.
INLINE_MEDIA_TYPES = frozenset(
    {
        "text/plain",
        "text/markdown",
        "text/csv",
        "text/x-diff",
        "text/x-patch",
        "application/json",
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
    }
)
TEXT_MEDIA_TYPES = frozenset({"application/json", "application/x-ndjson", "application/xml"})


def is_inline(media_type: str) -> bool:
    return media_type in INLINE_MEDIA_TYPES


def is_text(media_type: str) -> bool:
    return media_type.startswith("text/") or media_type in TEXT_MEDIA_TYPES


STREAM_CHUNK = 256 * 1024


async def _chunks(handle: IO[bytes]) -> AsyncIterator[bytes]:
    read = sync_to_async(handle.read, thread_sensitive=False)
    while piece := await read(STREAM_CHUNK):
        yield piece


def blob_response(blob: Blob, media_type: str, path: str, *, asynchronous: bool) -> FileResponse:
    """A blob's bytes served as the file `path`: text and images inline, anything else an
    attachment, nothing sniffed, nothing run."""
    handle = blob_open(blob)
    inline = is_inline(media_type)
    response = FileResponse(
        handle,
        as_attachment=not inline,
        filename=PurePosixPath(path).name,
        content_type=media_type,
    )
    if asynchronous:
        # Django reads a synchronous stream whole before sending it under ASGI.
        response.streaming_content = _chunks(handle)
    response["Content-Length"] = str(blob.size)
    response["X-Content-Type-Options"] = "nosniff"
    # Even a file shown inline runs nothing on this origin.
    response["Content-Security-Policy"] = "sandbox"
    return response
