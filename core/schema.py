"""The OpenAPI schema's error replies, declared once for every operation.

Every failure is rendered by `core.api_errors.exception_handler`: `{"detail": "…"}`, or
for bad input a map of field → messages. Which of them an operation can answer follows from
what it takes and how it is called; the few that only a service decides are declared on the
view method itself (`service_errors`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from rest_framework.authentication import SessionAuthentication

_MESSAGES = {"type": "array", "items": {"type": "string"}}

ERROR_COMPONENTS: dict[str, dict[str, Any]] = {
    "Error": {
        "type": "object",
        "properties": {"detail": {"type": "string"}},
        "required": ["detail"],
    },
    "ValidationError": {
        "type": "object",
        "description": (
            "Each bad field with its messages (a list field's by item index, a nested "
            "object's by field); a body that cannot be read is reported under `detail`."
        ),
        "properties": {"detail": {"oneOf": [{"type": "string"}, _MESSAGES]}},
        "additionalProperties": {"oneOf": [_MESSAGES, {"type": "object"}]},
    },
}

BAD_INPUT = (400, "ValidationError", "The body or a query parameter is invalid.")
UNAUTHENTICATED = (401, "Error", "No credentials, or an unknown or revoked API key.")
FORBIDDEN = (
    403,
    "Error",
    "Refused: the caller's role does not allow it, or a session request has no CSRF token.",
)
NOT_FOUND = (404, "Error", "Not found, or not visible to the caller.")
NOT_ACCEPTABLE = (406, "Error", "No reply in a media type the Accept header allows.")
UNSUPPORTED_MEDIA_TYPE = (415, "Error", "The body's content type is not accepted.")

Declared = tuple[int, str, str]
MethodT = TypeVar("MethodT", bound=Callable[..., Any])


def service_errors(*errors: Declared) -> Callable[[MethodT], MethodT]:
    """Declare, on a view method, the statuses only its service decides (a 409, a 429):
    `(status, component, description)`; the schema lists them beside the derived ones."""

    def declare(method: MethodT) -> MethodT:
        method.service_errors = errors  # type: ignore[attr-defined]
        return method

    return declare


_UNSAFE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


class ErrorDeclaringAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema, with the error replies each operation can give."""

    def get_operation(
        self,
        path: str,
        path_regex: str,
        path_prefix: str,
        method: str,
        registry: Any,
    ) -> dict[str, Any] | None:
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        responses = operation["responses"]
        for status, component, description in sorted(self._errors(operation)):
            responses.setdefault(str(status), self._error_response(component, description))
        return operation

    def _errors(self, operation: dict[str, Any]) -> list[tuple[int, str, str]]:
        located = {parameter["in"] for parameter in operation.get("parameters", [])}
        method = getattr(self.view, self.method.lower(), None)
        errors = list(getattr(method, "service_errors", ()))
        # DRF negotiates the reply's media type before anything else, on every view.
        errors.append(NOT_ACCEPTABLE)
        if "requestBody" in operation:
            errors += [BAD_INPUT, UNSUPPORTED_MEDIA_TYPE]
        elif "query" in located:
            errors.append(BAD_INPUT)
        if any(operation.get("security", [])):
            errors.append(UNAUTHENTICATED)
        if self.method in _UNSAFE_METHODS and self._accepts_sessions():
            # CSRF is enforced on a session's unsafe requests; every role check is on one.
            errors.append(FORBIDDEN)
        if "path" in located:
            errors.append(NOT_FOUND)
        return errors

    def _accepts_sessions(self) -> bool:
        return any(isinstance(a, SessionAuthentication) for a in self.view.get_authenticators())

    def _error_response(self, component: str, description: str) -> dict[str, Any]:
        resolved = ResolvedComponent(
            name=component,
            type=ResolvedComponent.SCHEMA,
            object=component,
            schema=ERROR_COMPONENTS[component],
        )
        self.registry.register_on_missing(resolved)
        return {
            "content": {"application/json": {"schema": resolved.ref}},
            "description": description,
        }
