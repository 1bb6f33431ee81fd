"""`GET /api/runs/<id>/artifacts?key=K&path=P[&repeat=N]`: one artifact of a case, streamed
with its stored media type. Plain text and raster images are shown inline; anything else is a
download (`Content-Disposition: attachment`), and nothing is sniffed or allowed to run script."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import PurePosixPath
from typing import IO, Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.views import APIView

from accounts.authentication import signed_in
from scorecards.blobs.downloads import artifact_find, is_inline
from scorecards.blobs.models import Artifact, Blob
from scorecards.blobs.store import blob_open

STREAM_CHUNK = 256 * 1024


async def _chunks(handle: IO[bytes]) -> AsyncIterator[bytes]:
    read = sync_to_async(handle.read, thread_sensitive=False)
    while piece := await read(STREAM_CHUNK):
        yield piece


def artifact_response(artifact: Artifact, *, asynchronous: bool) -> FileResponse:
    """The artifact's bytes as a response; under ASGI an async stream, read off the loop."""
    return blob_response(
        artifact.blob, artifact.media_type, artifact.path, asynchronous=asynchronous
    )


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


class ArtifactView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("key", str, required=True, description="The case key."),
            OpenApiParameter("path", str, required=True, description="The artifact's path."),
            OpenApiParameter(
                "repeat", int, description="Which repeat (0-based), when the run has several."
            ),
        ],
        responses={(200, "application/octet-stream"): OpenApiTypes.BINARY},
    )
    def get(self, request: Request, run_id: int) -> Any:
        params = request.query_params
        artifact = artifact_find(
            user=signed_in(request),
            run_id=run_id,
            key=params.get("key", ""),
            path=params.get("path", ""),
            repeat=params.get("repeat"),
        )
        asynchronous = isinstance(request._request, ASGIRequest)
        return artifact_response(artifact, asynchronous=asynchronous)
