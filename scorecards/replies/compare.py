"""Reply shapes of comparing two runs (MCP `compare_runs`, `GET /api/runs/<id>/compare`)."""

from __future__ import annotations

from pydantic import Field

from core.replies import Reply, Timestamp
from scorecards.models import Run
from scorecards.replies.runs import VersionRef
from scorecards.selectors.compare import (
    CHANGED,
    FIXED,
    MISSING,
    ORDER,
    REGRESSED,
    UNCHANGED,
    CaseChange,
    Comparison,
    Side,
)
from scorecards.selectors.confined import confined_regressions


class RunRef(Reply):
    id: int
    harness: VersionRef
    dataset: VersionRef
    status: str
    created_at: Timestamp

    @classmethod
    def of(cls, run: Run) -> RunRef:
        return cls(
            id=run.pk,
            harness=VersionRef.of(run.harness),
            dataset=VersionRef.of(run.dataset),
            status=run.status,
            created_at=run.created_at,
        )


class CaseSide(Reply):
    """One case in one run: how many of its settled repeats passed."""

    passes: int
    settled: int
    pass_fraction: float
    verdicts: list[str] = Field(description="Verdict per repeat, in repeat order.")

    @classmethod
    def of(cls, side: Side | None) -> CaseSide | None:
        if side is None:
            return None
        return cls(
            passes=side.passes,
            settled=side.settled,
            pass_fraction=round(side.fraction, 4),
            verdicts=side.verdicts,
        )


class CaseChangeItem(Reply):
    case: str
    change: str = Field(description="regressed, fixed, changed, unchanged or missing")
    a: CaseSide | None
    b: CaseSide | None
    flaky: bool = Field(description="Passed on some repeats and not on others, in A or in B.")

    @classmethod
    def of(cls, change: CaseChange) -> CaseChangeItem:
        return cls(
            case=change.key,
            change=change.change,
            a=CaseSide.of(change.a),
            b=CaseSide.of(change.b),
            flaky=change.flaky,
        )


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
    confined: str = Field(
        description="When run B ran on several hosts and every regression on one: "
        "`all 4 regressions ran on laptop-2, claude 2.1.0`; else ''."
    )

    @classmethod
    def of(cls, comparison: Comparison) -> CompareReply:
        groups: dict[str, list[CaseChangeItem]] = {kind: [] for kind in ORDER}
        for change in comparison.changes:
            groups[change.change].append(CaseChangeItem.of(change))
        return cls(
            a=RunRef.of(comparison.a),
            b=RunRef.of(comparison.b),
            counts=comparison.counts,
            regressions=groups[REGRESSED],
            fixes=groups[FIXED],
            changed=groups[CHANGED],
            missing=groups[MISSING],
            unchanged=[item.case for item in groups[UNCHANGED]],
            confined=confined_regressions(comparison),
        )
