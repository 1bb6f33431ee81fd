"""Reply shapes of comparing two runs (MCP `compare_runs`, `GET /api/runs/<id>/compare`) and of a
harness's history (its chart)."""

from __future__ import annotations

from pydantic import Field

from core.replies import Reply, Timestamp
from scorecards.replies import VersionRef


class RunRef(Reply):
    id: int
    harness: VersionRef
    dataset: VersionRef
    status: str
    created_at: Timestamp


class CaseSide(Reply):
    """One case in one run: how many of its settled repeats passed."""

    passes: int
    settled: int
    pass_fraction: float
    verdicts: list[str] = Field(description="Verdict per repeat, in repeat order.")


class CaseChangeItem(Reply):
    case: str
    change: str = Field(description="regressed, fixed, changed, unchanged or missing")
    a: CaseSide | None
    b: CaseSide | None
    flaky: bool = Field(description="Passed on some repeats and not on others, in A or in B.")


class CompareReply(Reply):
    """Run B against baseline A, case by case on pass fractions: regressions first."""

    a: RunRef
    b: RunRef
    counts: dict[str, int]
    regressions: list[CaseChangeItem]
    fixes: list[CaseChangeItem]
    changed: list[CaseChangeItem] = Field(description="Same pass fraction, other verdicts.")
    missing: list[CaseChangeItem] = Field(description="Cases settled in one run only.")
    unchanged: list[str]


class HistoryPoint(Reply):
    run: int
    url: str
    at: Timestamp
    pass_fraction: float | None
    settled: int
    status: str
    harness_version: int
    label: str = Field(description="metadata.git_sha (short) when set, else #<run id>.")
    self_hosted: bool


class HistorySeries(Reply):
    dataset: str
    points: list[HistoryPoint]


class HarnessHistoryReply(Reply):
    workspace: str
    harness: str
    series: list[HistorySeries]
