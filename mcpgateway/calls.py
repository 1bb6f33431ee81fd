"""How a tool calls a service: off the event loop, with domain errors as tool errors, and the
server's own passing trouble as a retryable tool error."""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from channels.db import database_sync_to_async
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent

from core.errors import ServiceError
from core.transient import Unavailable, transient_cause
from runnercli.protocol import ToolFailure

T = TypeVar("T")

log = logging.getLogger(__name__)

UNAVAILABLE = "unavailable"


def tool_error(exc: ServiceError) -> ToolError:
    """Render a domain error as the tool error the caller reads (the REST `detail`)."""
    detail = exc.detail
    if isinstance(detail, dict):
        parts = []
        for field, messages in detail.items():
            text = "; ".join(map(str, messages)) if isinstance(messages, list) else str(messages)
            parts.append(text if field in ("detail", "non_field_errors") else f"{field}: {text}")
        return ToolError(" ".join(parts))
    return ToolError(str(detail))


async def in_thread(fn: Callable[..., T], /, **kwargs: Any) -> T:
    """Run a synchronous service off the event loop (stale connections closed around it),
    with its domain errors as tool errors.

    On the loop's thread pool, not Django's one "thread-sensitive" thread: each service is
    its own transaction, and runners' calls must not queue one behind another (nor behind
    page views) on a single thread.
    """
    try:
        return await database_sync_to_async(fn, thread_sensitive=False)(**kwargs)
    except ServiceError as exc:
        raise tool_error(exc) from exc


def failure(failed: ToolFailure) -> CallToolResult:
    """A tool error that says in its structured content whether sending it again may help."""
    return CallToolResult(
        content=[TextContent(type="text", text=failed.message)],
        structured_content=failed.model_dump(mode="json"),
        is_error=True,
    )


def retryable(cause: str) -> CallToolResult:
    return failure(
        ToolFailure(
            code=UNAVAILABLE,
            message=f"The server could not serve this call now ({cause}); send it again shortly.",
            retryable=True,
        )
    )


def guarded(tool: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """The tool, answering the server's own passing trouble (the database unavailable or
    locked, a deadlock, a dropped connection) with a retryable tool error rather than a
    generic one. Anything else keeps its own answer: a validation error or a refusal is
    final. The signature is the tool's own, so the SDK derives the same schemas."""

    @functools.wraps(tool)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return await tool(*args, **kwargs)
        except Exception as exc:
            cause = exc.cause if isinstance(exc, Unavailable) else transient_cause(exc)
            if cause is None:
                raise
            log.warning("tool %s refused for a passing reason: %s", tool.__name__, cause)
            return retryable(cause)

    return call
