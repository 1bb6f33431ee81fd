"""JSON errors for every API failure: a 4xx with a reason, never an HTML 500 for bad input."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import bad_request as page_bad_request
from django.views.defaults import page_not_found
from django.views.defaults import server_error as page_server_error
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.errors import ServiceError
from core.transient import transient_cause


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    cause = transient_cause(exc)
    if cause is not None:
        # The server's own passing trouble, not the caller's: say so, and when to come back.
        detail = f"The server is briefly unavailable ({cause}); try again."
        return Response(
            {"detail": detail, "retryable": True},
            status=503,
            headers={"Retry-After": "1"},
        )
    if isinstance(exc, RequestDataTooBig):
        return Response({"detail": too_big()}, status=413)
    if isinstance(exc, ServiceError):
        body = exc.detail if isinstance(exc.detail, dict) else {"detail": exc.detail}
        return Response(body, status=exc.status)
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(
            exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
        )
    return drf_exception_handler(exc, context)


def too_big() -> str:
    """Why a JSON body over Django's limit is refused, and what to send instead."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0
    return (
        f"The request body is over the limit of {limit} bytes for a JSON body "
        "(DATA_UPLOAD_MAX_MEMORY_SIZE). Send a large dataset as JSON Lines instead: "
        "POST /api/workspaces/<slug>/datasets?name=NAME with Content-Type: "
        "application/x-ndjson and one case per line, which is read as a stream."
    )


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """The 404 of a path no route matches (`/api/runners/abc`): JSON under /api/, as the API's
    own 404s are; the usual page elsewhere."""
    if request.path_info.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return page_not_found(request, exception)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A request Django refuses before any view (a bad Host header, say): JSON under /api/."""
    if request.path_info.startswith("/api/"):
        return JsonResponse({"detail": "Bad request."}, status=400)
    return page_bad_request(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """An unexpected failure: JSON under /api/, with nothing of it revealed."""
    if request.path_info.startswith("/api/"):
        return JsonResponse({"detail": "Server error."}, status=500)
    return page_server_error(request)
