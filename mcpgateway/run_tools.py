"""Run tools: what a member, their agent or `runnercli submit` calls with an `evk_` API key to
start, follow, compare, rerun and cancel scorecard runs.

The same selectors, services and reply models as the REST API: `get_run` is the REST run
reply, `list_results` and `list_runs` the REST items with the bare `next_cursor` (the same
token as the `cursor` of REST's `next` URL).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from django.conf import settings
from pydantic import Field

from mcpgateway.auth import current_principal
from mcpgateway.calls import in_thread
from scorecards.replies.compare import CompareReply
from scorecards.replies.results import ResultPage
from scorecards.replies.runs import RunPage, RunReply
from scorecards.selectors.compare import COMPARE_PAGE, run_compare
from scorecards.selectors.results import MAX_RESULTS_PAGE, RESULTS_PAGE, results_page, run_overview
from scorecards.selectors.runs import run_get, runs_page
from scorecards.services import (
    MAX_BUDGET_USD,
    MAX_CONCURRENCY,
    MAX_REPEATS,
    run_cancel,
    run_rerun,
    run_start,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User

RunId = Annotated[int, Field(ge=1, le=2**63 - 1)]
Limit = Annotated[int, Field(ge=1, le=MAX_RESULTS_PAGE)]


def _reply(run: Any) -> RunReply:
    return RunReply.of(run_overview(run), base_url=settings.EVERDICT_PUBLIC_URL.rstrip("/"))


def _started(user: User, **kwargs: Any) -> RunReply:
    return _reply(run_start(user=user, **kwargs))


def _run(user: User, run_id: int) -> RunReply:
    return _reply(run_get(user=user, run_id=run_id))


def _results(user: User, run_id: int, **kwargs: Any) -> ResultPage:
    return ResultPage.of(*results_page(run_get(user=user, run_id=run_id), **kwargs))


def _compared(user: User, a: int | None, b: int, page: int) -> CompareReply:
    return CompareReply.of(run_compare(user=user, a=a, b=b, page=page))


def _runs(**kwargs: Any) -> RunPage:
    return RunPage.of(*runs_page(**kwargs))


def _rerun(user: User, run_id: int, only: str) -> RunReply:
    return _reply(run_rerun(user=user, run_id=run_id, only=only))


def _canceled(user: User, run_id: int) -> RunReply:
    return _reply(run_cancel(user=user, run_id=run_id))


async def start_run(
    workspace: str,
    harness: str,
    dataset: str,
    runtime: Annotated[str, Field(description="`self:<runner_id>` or `self:any`.")],
    concurrency: Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)] = 1,
    repeats: Annotated[int, Field(ge=1, le=MAX_REPEATS, description="Runs of each case.")] = 1,
    harness_version: Annotated[int | None, Field(ge=1, description="Default: latest.")] = None,
    dataset_version: Annotated[int | None, Field(ge=1, description="Default: latest.")] = None,
    metadata: Annotated[
        dict[str, Any] | None,
        Field(description="At most 4 KiB of JSON: git_sha, branch, dirty, ci_url, …"),
    ] = None,
    max_cost_usd: Annotated[
        float | None,
        Field(
            gt=0,
            le=float(MAX_BUDGET_USD),
            description="The run's budget (USD): once its cases and judges reported that much, "
            "the cases not started are skipped.",
        ),
    ] = None,
) -> RunReply:
    """Run a harness version over a dataset version on your runner(s)."""
    user = current_principal().require_user("start_run")
    return await in_thread(
        _started,
        user=user,
        workspace_slug=workspace,
        harness=harness,
        dataset=dataset,
        runtime=runtime,
        concurrency=concurrency,
        repeats=repeats,
        harness_version=harness_version,
        dataset_version=dataset_version,
        metadata=metadata,
        max_cost_usd=max_cost_usd,
    )


async def get_run(run_id: RunId) -> RunReply:
    """Read a run: status, summary, the newest 50 events, the first 100 results (outputs cut
    to 1 KiB) and `next_cursor` for `list_results`."""
    user = current_principal().require_user("get_run")
    return await in_thread(_run, user=user, run_id=run_id)


async def list_results(
    run_id: RunId,
    verdict: Annotated[
        str | None, Field(description="pass, fail, error, or a list: `fail,error`.")
    ] = None,
    cursor: Annotated[str | None, Field(description="`next_cursor` of the last page.")] = None,
    limit: Limit = RESULTS_PAGE,
) -> ResultPage:
    """A run's results in settlement order (stable while results keep arriving)."""
    user = current_principal().require_user("list_results")
    return await in_thread(
        _results, user=user, run_id=run_id, verdict=verdict, cursor=cursor, limit=limit
    )


async def list_runs(
    workspace: str,
    harness: str | None = None,
    dataset: str | None = None,
    status: Literal["queued", "running", "succeeded", "failed", "canceled"] | None = None,
    cursor: str | None = None,
    limit: Annotated[int, Field(ge=1, le=MAX_RESULTS_PAGE)] = 50,
) -> RunPage:
    """A workspace's runs, newest first, filtered by harness, dataset and status."""
    user = current_principal().require_user("list_runs")
    return await in_thread(
        _runs,
        user=user,
        workspace_slug=workspace,
        harness=harness,
        dataset=dataset,
        status=status,
        cursor=cursor,
        limit=limit,
    )


async def compare_runs(
    b: Annotated[RunId, Field(description="The run to judge.")],
    a: Annotated[
        RunId | None,
        Field(
            description="The baseline. Default: the previous finished run of the same "
            "harness over the same dataset."
        ),
    ] = None,
    page: Annotated[
        int,
        Field(
            ge=1,
            le=2**31,
            description=f"Which page of cases to list ({COMPARE_PAGE} a page, regressions "
            "first): the last reply's `next_page`.",
        ),
    ] = 1,
) -> CompareReply:
    """Compare run B with baseline A: whether B differs beyond noise (`numbers`), then case by
    case on pass fractions, a page at a time: regressions (a case's pass fraction fell),
    fixes, changed, missing, unchanged; `counts` are every case's."""
    user = current_principal().require_user("compare_runs")
    return await in_thread(_compared, user=user, a=a, b=b, page=page)


async def rerun(run_id: RunId, only: Literal["failed", "unfinished"]) -> RunReply:
    """Start a new run over the failed (fail or error) or the unfinished cases of a run."""
    user = current_principal().require_user("rerun")
    return await in_thread(_rerun, user=user, run_id=run_id, only=only)


async def cancel_run(run_id: RunId) -> RunReply:
    """Cancel a run (your own; any run of a workspace you administer)."""
    user = current_principal().require_user("cancel_run")
    return await in_thread(_canceled, user=user, run_id=run_id)


RUN_TOOLS: list[Callable[..., Any]] = [
    start_run,
    get_run,
    list_results,
    list_runs,
    compare_runs,
    rerun,
    cancel_run,
]
