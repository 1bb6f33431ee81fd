"""`GET /api/runs/<id>/files?key=K&path=P`: a running case's files, read by its runner now —
a directory's listing as JSON, a file's content served like an artifact (text and images
inline, anything else a download, nothing sniffed or run). 504 when the runner does not
answer in time.

An async view: the page's request waits for the runner on the event loop, blocking no thread
meanwhile (a sync view blocks the request's thread for sync code for the whole wait)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import signed_in
from core.schema import service_errors
from scorecards.blobs.responses import blob_response
from scorecards.files.awaiting import fs_request_await
from scorecards.files.replies import CaseFiles
from scorecards.files.services import FsAsked, fs_answer_accepted, fs_request_ask


class CaseFilesView(APIView):
    async def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """DRF's dispatch, awaited: authentication, permissions and the ask in one hop to the
        request's thread for sync code (they read the database, on the request's connection as
        a sync view does), the wait for the answer on the loop; errors answered by the API's
        exception handler as in every view."""
        self.args, self.kwargs = args, kwargs
        drf_request = self.initialize_request(request, *args, **kwargs)
        self.request = drf_request
        self.headers = self.default_response_headers
        try:
            begun = await sync_to_async(self.ask)(drf_request, *args, **kwargs)
            response = await self.get(drf_request, begun) if isinstance(begun, FsAsked) else begun
        except Exception as exc:
            response = self.handle_exception(exc)
        self.response = self.finalize_response(drf_request, response, *args, **kwargs)
        return _rendered(self.response)

    def ask(self, request: Request, run_id: int) -> FsAsked | Response:
        """Authenticate, check permissions, and queue the request for the runner."""
        self.initial(request, run_id=run_id)
        if request.method == "OPTIONS":
            return self.options(request, run_id=run_id)
        if request.method not in ("GET", "HEAD"):
            self.http_method_not_allowed(request)
        params = request.query_params
        return fs_request_ask(
            user=signed_in(request),
            run_id=run_id,
            key=params.get("key", ""),
            # `read` of a directory is answered with its listing.
            op=params.get("op") or "read",
            path=params.get("path", ""),
            repeat=params.get("repeat"),
        )

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
    async def get(self, request: Request, asked: FsAsked) -> Any:
        # The runner's answer to the request `ask` queued (no docstring: the schema's
        # description of the operation would change).
        answer = fs_answer_accepted(await fs_request_await(request=asked))
        if answer.blob is None:
            return Response(CaseFiles.of(answer).data())
        asynchronous = isinstance(request._request, ASGIRequest)
        # Opening the blob is the store's I/O: off the loop, in the request's thread.
        return await sync_to_async(blob_response)(
            answer.blob, answer.media_type, answer.path, asynchronous=asynchronous
        )


def _rendered(response: Any) -> Any:
    """A JSON reply rendered here, on the loop (no I/O), as a plain response: Django renders
    a DRF `Response` in a hop to its thread for sync code. Any other renderer's reply (the
    browsable API) is left to Django."""
    if not isinstance(response, Response) or not isinstance(
        getattr(response, "accepted_renderer", None), JSONRenderer
    ):
        return response
    response.render()
    plain = HttpResponse(response.content, status=response.status_code)
    for header, value in response.items():
        plain[header] = value
    return plain
