"""`GET /api/runs/<id>/artifacts?key=K&path=P[&repeat=N]`: one artifact of a case, streamed
with its stored media type. Plain text and raster images are shown inline; anything else is a
download (`Content-Disposition: attachment`), and nothing is sniffed or allowed to run script."""

from __future__ import annotations

from django.core.handlers.asgi import ASGIRequest
from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.views import APIView

from accounts.authentication import signed_in
from scorecards.blobs.responses import blob_response
from scorecards.blobs.selectors import artifact_find


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
    def get(self, request: Request, run_id: int) -> FileResponse:
        params = request.query_params
        artifact = artifact_find(
            user=signed_in(request),
            run_id=run_id,
            key=params.get("key", ""),
            path=params.get("path", ""),
            repeat=params.get("repeat"),
        )
        asynchronous = isinstance(request._request, ASGIRequest)
        # Under ASGI an async stream, read off the loop.
        return blob_response(
            artifact.blob, artifact.media_type, artifact.path, asynchronous=asynchronous
        )
