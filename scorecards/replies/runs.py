"""Reply shapes of runs: one run with its summary, events and first results; runs as listed;
a run's log lines."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from pydantic import Field, RootModel

from core.replies import Reply, Timestamp
from scorecards.models import DatasetVersion, HarnessVersion, Run, RunEvent
from scorecards.numbers import Estimate
from scorecards.replies.hosts import ByHostReply
from scorecards.replies.results import RunResultItem, result_items
from scorecards.selectors.cursors import cursor_encode
from scorecards.selectors.results import RunOverview
from scorecards.selectors.runs import LogRow
from scorecards.selectors.summary import budget_figures

# Beside a run's status (the state machine's), when its budget skipped the cases not started.
BUDGET_REACHED = "budget reached"


class VersionRef(Reply):
    name: str
    version: int

    @classmethod
    def of(cls, version: HarnessVersion | DatasetVersion) -> VersionRef:
        return cls(name=version.name, version=version.version)


class RunSummary(Reply):
    total: int = Field(description="Jobs: cases times repeats.")
    pending: int
    running: int
    pass_: int = Field(alias="pass")
    fail: int
    error: int
    judging: int = Field(default=0, description="Cases whose judges are still due.")
    canceled: int
    pass_rate: float | None = Field(description="Passing results over settled results.")
    mean_score: float | None
    cases: int = Field(description="Cases with at least one settled result.")
    pass_fraction: float | None = Field(
        description="Mean over cases of each case's passing share of its settled repeats "
        "(an error counts 0)."
    )
    stderr: float | None = Field(description="Standard error of `pass_fraction` over cases.")
    flaky: int = Field(description="Cases that both passed and did not, across repeats.")
    skipped: int = Field(default=0, description="Results never run (budget spent): left out.")
    max_cost_usd: float | None = Field(
        default=None, description="The run's budget: the cost its cases and judges may report."
    )
    budget_ended: bool = Field(
        default=False,
        description="The budget was reached and the cases not started were skipped; the cases "
        "running then finished, so the cost may pass the budget.",
    )
    pass_rate_ci: Estimate | None = Field(
        default=None,
        description="The pass rate with its 95 % interval: Wilson when every case settled once, "
        "else the mean pass fraction over cases with a seeded bootstrap over cases. Errors count "
        "as not passing; results still judging and skipped ones are left out and counted.",
    )
    mean_score_ci: Estimate | None = Field(
        default=None,
        description="The mean score over cases with its 95 % seeded bootstrap interval over cases.",
    )
    cost_usd: float = Field(description="Reported cost: provenance, not billed.")
    judge_cost_usd: float = Field(
        default=0.0, description="The judges' reported cost: provenance, not billed."
    )
    tampered: int = Field(default=0, description="Results whose agent changed a protected path.")
    phases: dict[str, float] | None = Field(
        default=None,
        description="Mean seconds of each phase over the results that report them: setup_s, "
        "agent_s, verify_s, collect_s.",
    )


class RunEventItem(Reply):
    at: Timestamp
    level: str
    message: str

    @classmethod
    def of(cls, event: RunEvent) -> RunEventItem:
        return cls(at=event.at, level=event.level, message=event.message)


class RunReply(Reply):
    """A scorecard run: its summary, the newest events and the first settled results."""

    id: int
    workspace: str
    harness: VersionRef
    dataset: VersionRef
    status: str
    status_detail: str = Field(
        default="",
        description="What ended the run besides its cases: 'budget reached' when its budget "
        "skipped the cases not started; '' otherwise.",
    )
    runtime: str
    concurrency: int
    repeats: int
    parent: int | None = Field(description="The run this one re-runs cases of.")
    rerun_of: str = Field(description="Which cases of the parent: failed, unfinished or ''.")
    metadata: dict[str, Any]
    submitted_by: str
    created_at: Timestamp
    finished_at: Timestamp | None
    summary: RunSummary
    graded_with: VersionRef | None = Field(
        description="The harness version whose grader scored the verdicts, after a regrade."
    )
    regraded_at: Timestamp | None
    by_host: ByHostReply = Field(
        description="Pass rate, count and mean duration per runner and per fingerprint."
    )
    events: list[RunEventItem] = Field(description="The newest 50, oldest first.")
    results: list[RunResultItem] = Field(description="The first 100 settled, outputs cut to 1 KiB.")
    results_next: str | None = Field(description="The URL of the next page of results.")
    next_cursor: str | None = Field(description="The same page as a bare cursor.")

    @classmethod
    def of(cls, overview: RunOverview, *, base_url: str = "") -> RunReply:
        """The run as `GET /api/runs/<id>` shows it; `results_next` (under `base_url`) pages
        through the rest of its results."""
        run = overview.run
        cursor = cursor_encode(overview.last) if overview.last else None
        return cls(
            id=run.pk,
            workspace=run.workspace.slug,
            harness=VersionRef.of(run.harness),
            dataset=VersionRef.of(run.dataset),
            status=run.status,
            status_detail=status_detail(overview.summary),
            runtime=run.runtime,
            concurrency=run.concurrency,
            repeats=run.repeats,
            parent=run.parent_id,
            rerun_of=run.rerun_of,
            metadata=run.metadata or {},
            submitted_by=run.submitted_by.get_username(),
            created_at=run.created_at,
            finished_at=run.finished_at,
            summary=RunSummary.model_validate(overview.summary),
            graded_with=VersionRef.of(run.graded_with) if run.graded_with else None,
            regraded_at=run.regraded_at,
            by_host=ByHostReply.of(overview.by_host),
            events=[RunEventItem.of(event) for event in overview.events],
            results=result_items(overview.results),
            results_next=_results_url(run, cursor, base_url) if cursor else None,
            next_cursor=cursor,
        )


def status_detail(summary: dict[str, Any]) -> str:
    """What the run's status says besides itself: that its budget ended it."""
    return BUDGET_REACHED if summary.get("budget_ended") else ""


def listed_status_detail(run: Run) -> str:
    """`status_detail` of a run of `runs_of`, from its `n_skipped` results."""
    return status_detail(budget_figures(run, getattr(run, "n_skipped", 0)))


def _results_url(run: Run, cursor: str, base_url: str) -> str:
    path = reverse("api-run-results", args=[run.pk])
    return f"{base_url}{path}?{urlencode({'cursor': cursor})}"


class RunItem(Reply):
    """A run as listed: no events or results."""

    id: int
    workspace: str
    harness: VersionRef
    dataset: VersionRef
    status: str
    status_detail: str = Field(
        default="", description="As the run's reply says it: 'budget reached' or ''."
    )
    runtime: str
    repeats: int
    parent: int | None
    metadata: dict[str, Any]
    submitted_by: str
    created_at: Timestamp
    finished_at: Timestamp | None
    settled: int = Field(description="Settled results.")
    passed: int = Field(description="Passing results.")

    @classmethod
    def of(cls, run: Run) -> RunItem:
        """A run of `runs_of` as it is listed."""
        return cls(
            id=run.pk,
            workspace=run.workspace.slug,
            harness=VersionRef.of(run.harness),
            dataset=VersionRef.of(run.dataset),
            status=run.status,
            status_detail=listed_status_detail(run),
            runtime=run.runtime,
            repeats=run.repeats,
            parent=run.parent_id,
            metadata=run.metadata or {},
            submitted_by=run.submitted_by.get_username(),
            created_at=run.created_at,
            finished_at=run.finished_at,
            settled=getattr(run, "n_done", 0),
            passed=getattr(run, "n_pass", 0),
        )


class RunPage(Reply):
    """A page of a workspace's runs, newest first (MCP `list_runs`)."""

    runs: list[RunItem]
    next_cursor: str | None

    @classmethod
    def of(cls, runs: list[Run], last: int | None) -> RunPage:
        """The runs of `runs_page`, and the cursor past `last` (the id to continue before)."""
        return cls(
            runs=[RunItem.of(run) for run in runs],
            next_cursor=cursor_encode(last) if last else None,
        )


class RunItemPage(Reply):
    """The REST page of runs: DRF's cursor pagination."""

    next: str | None
    previous: str | None
    results: list[RunItem]


class LogLine(Reply):
    seq: int
    at: Timestamp
    case: str
    line: str

    @classmethod
    def of(cls, row: LogRow) -> LogLine:
        seq, at, case, line = row
        return cls(seq=seq, at=at, case=case, line=line)


class LogLines(RootModel[list[LogLine]]):
    """A run's log lines, in order."""
