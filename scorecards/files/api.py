"""`GET /api/runs/<id>/files?key=K&path=P`: a running case's files, read by its runner now —
a directory's listing as JSON, a file's content served like an artifact (text and images
inline, anything else a download, nothing sniffed or run). 504 when the runner does not
answer in time."""

from __future__ import annotations

from typing import Any

from django.core.handlers.asgi import ASGIRequest
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import signed_in
from core.schema import service_errors
from scorecards.blobs.responses import blob_response
from scorecards.files.replies import CaseFiles
from scorecards.files.services import fs_answer_get


class CaseFilesView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("key", str, required=True, description="The case key."),
            OpenApiParameter("path", str, description="Relative to its working directory."),
            OpenApiParameter("op", str, enum=["list", "read"], description="read (default)."),
            OpenApiParameter("repeat", int, description="Which repeat, when several run."),
        ],
        responses={
            (200, "application/json"): CaseFiles,
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
        },
    )
    @service_errors(
        (403, "Error", "The runner refused the path (it leads out) or keeps the files."),
        (409, "Error", "The case is not running."),
        (504, "Error", "The runner did not answer in time."),
    )
    def get(self, request: Request, run_id: int) -> Any:
        params = request.query_params
        path = params.get("path", "")
        # `read` of a directory is answered with its listing.
        op = params.get("op") or "read"
        answer = fs_answer_get(
            user=signed_in(request),
            run_id=run_id,
            key=params.get("key", ""),
            op=op,
            path=path,
            repeat=params.get("repeat"),
        )
        if answer.blob is None:
            return Response(CaseFiles.of(answer).data())
        asynchronous = isinstance(request._request, ASGIRequest)
        return blob_response(answer.blob, answer.media_type, answer.path, asynchronous=asynchronous)
