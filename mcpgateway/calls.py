"""How a tool calls a service: off the event loop, with domain errors as tool errors."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import anyio
from channels.db import database_sync_to_async
from mcp.server.mcpserver.exceptions import ToolError

from everdict.errors import ServiceError

T = TypeVar("T")

log = logging.getLogger(__name__)


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


async def cancel_once(
    coro: Coroutine[Any, Any, T], *, undelivered: Callable[[T], Awaitable[None]]
) -> T:
    """Await `coro` in its own task, forwarding a cancellation to it exactly once.

    The SDK cancels a handler whose client hung up through an anyio cancel scope, which
    re-cancels every later await until the scope exits. That would cut short the cleanup a
    long-poll does when cancelled (giving back a job it had just claimed). Here the
    cancellation reaches the long-poll once, as a plain asyncio cancel, and its cleanup is
    awaited under a shield. A result that was ready but can no longer be delivered is
    handed to `undelivered`, also shielded.
    """
    task = asyncio.ensure_future(coro)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.wait([task])
            if not task.cancelled() and task.exception() is None:
                try:
                    await undelivered(task.result())
                except Exception:
                    # The cancellation still goes on; the lease will expire instead.
                    log.exception("could not give back an undelivered result")
        raise
