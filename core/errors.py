"""Domain errors raised by services; the API, pages and MCP tools each render them."""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    status = 400

    def __init__(self, detail: str | dict[str, Any]) -> None:
        super().__init__(detail if isinstance(detail, str) else str(detail))
        self.detail = detail


class Invalid(ServiceError):
    status = 400


class Forbidden(ServiceError):
    """The caller may see it, but their role in the workspace does not allow this."""

    status = 403


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409


class QuotaExceeded(ServiceError):
    status = 429


class NoAnswer(ServiceError):
    """Someone else had to answer (a runner, for a running case's files) and did not in time."""

    status = 504
