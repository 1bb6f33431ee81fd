"""Reply shapes of the scorecards app, shared by the REST API, the pages and MCP.

Shapes only, and their construction from one row; the selectors assemble the larger ones
(a run with its summary, events and results).
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pydantic import Field, RootModel

from core.replies import Reply, Timestamp
from scorecards.models import DatasetVersion, HarnessVersion, Membership, Workspace

if TYPE_CHECKING:
    from scorecards.selectors import DatasetEntry, HarnessEntry


def _money(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


class WorkspaceReply(Reply):
    slug: str
    name: str
    run_quota: int | None = Field(description="Runs per calendar month; null means unlimited.")
    budget_usd: float | None
    budget_tokens: int | None
    spent_usd: float
    spent_tokens: int
    role: str = Field(description="The caller's role: owner, admin, member or viewer.")

    @classmethod
    def of(cls, workspace: Workspace, role: str) -> WorkspaceReply:
        return cls(
            slug=workspace.slug,
            name=workspace.name,
            run_quota=workspace.run_quota,
            budget_usd=_money(workspace.budget_usd),
            budget_tokens=workspace.budget_tokens,
            spent_usd=float(workspace.spent_usd),
            spent_tokens=workspace.spent_tokens,
            role=role,
        )


class WorkspaceReplies(RootModel[list[WorkspaceReply]]):
    """The REST list of the caller's workspaces."""


class MemberReply(Reply):
    workspace: str
    username: str
    role: str

    @classmethod
    def of(cls, membership: Membership) -> MemberReply:
        return cls(
            workspace=membership.workspace.slug,
            username=membership.user.get_username(),
            role=membership.role,
        )


class HarnessReply(Reply):
    name: str
    version: int
    spec: dict[str, Any]
    created_at: Timestamp

    @classmethod
    def of(cls, harness: HarnessVersion) -> HarnessReply:
        return cls(
            name=harness.name,
            version=harness.version,
            spec=harness.spec,
            created_at=harness.created_at,
        )


class HarnessItem(HarnessReply):
    """A harness as listed: its latest version, and how many versions it has."""

    versions: int

    @classmethod
    def of_entry(cls, entry: HarnessEntry) -> HarnessItem:
        return cls(**HarnessReply.of(entry.latest).model_dump(), versions=entry.versions)


class HarnessItems(RootModel[list[HarnessItem]]):
    """The REST list of a workspace's harnesses."""


class DatasetReply(Reply):
    name: str
    version: int
    cases: int = Field(description="The number of cases.")
    created_at: Timestamp

    @classmethod
    def of(cls, dataset: DatasetVersion) -> DatasetReply:
        return cls(
            name=dataset.name,
            version=dataset.version,
            cases=dataset.case_count,
            created_at=dataset.created_at,
        )


class DatasetItem(DatasetReply):
    """A dataset as listed: its latest version, and how many versions it has."""

    versions: int

    @classmethod
    def of_entry(cls, entry: DatasetEntry) -> DatasetItem:
        return cls(**DatasetReply.of(entry.latest).model_dump(), versions=entry.versions)


class DatasetItems(RootModel[list[DatasetItem]]):
    """The REST list of a workspace's datasets."""


class VersionRef(Reply):
    name: str
    version: int


class RunSummary(Reply):
    total: int = Field(description="Jobs: cases times repeats.")
    pending: int
    running: int
    pass_: int = Field(alias="pass")
    fail: int
    error: int
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
    cost_usd: float = Field(description="Reported cost: provenance, not billed.")


class RunEventItem(Reply):
    at: Timestamp
    level: str
    message: str


class RunResultItem(Reply):
    """One settled result of a case (one repeat), its output cut to a preview."""

    case: str
    repeat: int
    seq: int = Field(description="Settlement order within the run.")
    verdict: str
    score: float
    status: str
    output: str
    output_truncated: bool = Field(
        description="The output was cut to 1 KiB; the case reply and the exports hold it whole."
    )
    error: str
    reason: str = Field(description="The grader's reason.")
    duration_ms: int
    usage: dict[str, Any] | None
    provenance: dict[str, Any]
    runner: int | None


class ResultPage(Reply):
    """A page of a run's results, in settlement order (MCP `list_results`)."""

    results: list[RunResultItem]
    next_cursor: str | None = Field(description="Pass it as `cursor` for the next page.")


class RunReply(Reply):
    """A scorecard run: its summary, the newest events and the first settled results."""

    id: int
    workspace: str
    harness: VersionRef
    dataset: VersionRef
    status: str
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
    events: list[RunEventItem] = Field(description="The newest 50, oldest first.")
    results: list[RunResultItem] = Field(description="The first 100 settled, outputs cut to 1 KiB.")
    results_next: str | None = Field(description="The URL of the next page of results.")
    next_cursor: str | None = Field(description="The same page as a bare cursor.")


class RunItem(Reply):
    """A run as listed: no events or results."""

    id: int
    workspace: str
    harness: VersionRef
    dataset: VersionRef
    status: str
    runtime: str
    repeats: int
    parent: int | None
    metadata: dict[str, Any]
    submitted_by: str
    created_at: Timestamp
    finished_at: Timestamp | None
    settled: int = Field(description="Settled results.")
    passed: int = Field(description="Passing results.")


class RunPage(Reply):
    """A page of a workspace's runs, newest first (MCP `list_runs`)."""

    runs: list[RunItem]
    next_cursor: str | None


class RunItemPage(Reply):
    """The REST page of runs: DRF's cursor pagination."""

    next: str | None
    previous: str | None
    results: list[RunItem]


class ResultItemPage(Reply):
    """The REST page of results: DRF's cursor pagination."""

    next: str | None
    previous: str | None
    results: list[RunResultItem]


class LogLine(Reply):
    seq: int
    at: Timestamp
    case: str
    line: str


class LogLines(RootModel[list[LogLine]]):
    """A run's log lines, in order."""
