"""How a tool calls a service: off the event loop, with domain errors as tool errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from channels.db import database_sync_to_async
from mcp.server.mcpserver.exceptions import ToolError

from accounts.errors import ServiceError

T = TypeVar("T")


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
