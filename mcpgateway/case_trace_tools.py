"""Personal tools for a case's trace: what `GET /api/runs/<id>/trace` answers, with the same
authorization (any member of the run's workspace; anyone else is told it does not exist)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from mcpgateway.auth import current_principal
from mcpgateway.calls import in_thread
from scorecards.traces.replies import TraceReply
from scorecards.traces.selectors import MAX_TRACE_PAGE, TRACE_PAGE, case_attempt, trace_page

if TYPE_CHECKING:
    from django.contrib.auth.models import User

RunId = Annotated[int, Field(ge=1, le=2**63 - 1)]


def _trace(user: User, run_id: int, key: str, **kwargs: Any) -> TraceReply:
    where = case_attempt(
        user=user,
        run_id=run_id,
        key=key,
        repeat=kwargs.pop("repeat"),
        attempt=kwargs.pop("attempt"),
    )
    return TraceReply.of(trace_page(where, **kwargs))


async def get_case_trace(
    run_id: RunId,
    key: str,
    after_seq: Annotated[
        int | None, Field(ge=-1, description="Events after this seq (`next_after_seq`).")
    ] = None,
    limit: Annotated[int, Field(ge=1, le=MAX_TRACE_PAGE)] = TRACE_PAGE,
    repeat: Annotated[
        int | None, Field(ge=0, description="Which repeat (0-based), when the run has several.")
    ] = None,
    attempt: Annotated[
        int | None, Field(ge=0, description="An attempt's epoch (default: the latest).")
    ] = None,
) -> TraceReply:
    """A case's trace, a page at a time: messages, tool calls with their arguments, tool
    results with their durations, usage and errors; with what the case is doing now (`step`)
    and its token and cost totals. Page on with `after_seq = next_after_seq`."""
    user = current_principal().require_user("get_case_trace")
    return await in_thread(
        _trace,
        user=user,
        run_id=run_id,
        key=key,
        after_seq=None if after_seq is None else str(after_seq),
        limit=limit,
        repeat=repeat,
        attempt=attempt,
    )


CASE_TRACE_TOOLS: list[Callable[..., Any]] = [get_case_trace]
