"""`search_runs`: what `GET /api/runs/<id>/search` and `GET /api/workspaces/<slug>/search`
answer, with the same scope (the members of the run's workspace; anyone else is told it does
not exist)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from mcpgateway.auth import current_principal
from mcpgateway.calls import in_thread
from scorecards.search.replies import SearchReply
from scorecards.search.selectors import MAX_PAGE, MAX_QUERY_CHARS, PAGE, search_results

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def _search(user: User, **kwargs: Any) -> SearchReply:
    return SearchReply.of(search_results(user=user, **kwargs))


async def search_runs(
    query: Annotated[
        str, Field(description=f"Literal text, at most {MAX_QUERY_CHARS} characters.")
    ],
    run_id: Annotated[
        int | None, Field(ge=1, le=2**63 - 1, description="One run; else `workspace`'s runs.")
    ] = None,
    workspace: Annotated[str | None, Field(description="A workspace's slug.")] = None,
    page: Annotated[int, Field(ge=1, le=10_000)] = 1,
    limit: Annotated[int, Field(ge=1, le=MAX_PAGE)] = PAGE,
) -> SearchReply:
    """The cases whose output, reason, error, stderr tail or settled trace holds `query`,
    literally and ignoring case (`rm -rf`, `TypeError:` are searched as typed), each with its
    matches in context (HTML, the match in <mark>); a page at a time (`next_page`)."""
    user = current_principal().require_user("search_runs")
    return await in_thread(
        _search,
        user=user,
        query=query,
        run_id=run_id,
        workspace_slug=workspace if run_id is None else None,
        page=page,
        limit=limit,
    )


SEARCH_TOOLS: list[Callable[..., Any]] = [search_runs]
