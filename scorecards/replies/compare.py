"""Reply shapes of comparing two runs (MCP `compare_runs`, `GET /api/runs/<id>/compare`)."""

from __future__ import annotations

from pydantic import Field

from core.replies import Reply, Timestamp
from scorecards.models import Run
from scorecards.numbers import CaseTest, Estimate, Significance
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
    Numbers,
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
    tampered: int = Field(
        default=0, description="Its results whose agent changed a protected path."
    )

    @classmethod
    def of(cls, side: Side | None) -> CaseSide | None:
        if side is None:
            return None
        # Built from the database's own rows, thousands a compare: not validated again.
        return cls.model_construct(
            passes=side.passes,
            settled=side.settled,
            pass_fraction=round(side.fraction, 4),
            verdicts=side.verdicts,
            tampered=side.tampered,
        )


class CaseChangeItem(Reply):
    case: str
    change: str = Field(description="regressed, fixed, changed, unchanged or missing")
    a: CaseSide | None
    b: CaseSide | None
    flaky: bool = Field(description="Passed on some repeats and not on others, in A or in B.")
    test: CaseTest | None = Field(
        default=None,
        description="With repeats, a regressed or fixed case: Fisher's exact test of its passes "
        "in A against B, and whether it survives the Benjamini-Hochberg correction (5 % false "
        "discoveries) over the regressed and fixed cases.",
    )

    @classmethod
    def of(cls, change: CaseChange) -> CaseChangeItem:
        return cls.model_construct(
            case=change.key,
            change=change.change,
            a=CaseSide.of(change.a),
            b=CaseSide.of(change.b),
            flaky=change.flaky,
            test=change.test,
        )


class CompareNumbers(Reply):
    """Whether B differs from A beyond noise, on the cases both runs settled (paired by key)."""

    sentence: str = Field(
        description="`pass rate 62 % [48-74] vs 70 % [56-81]; Δ -8 pp [-19, +3], p = 0.18 "
        "(McNemar, 40 pairs): no detectable difference — these pairs detect ≥ 21 pp` (a true "
        "minus sign, an en dash between an interval's ends), or `… no paired cases`."
    )
    a: Estimate = Field(description="A's pass rate with its 95 % interval.")
    b: Estimate = Field(description="B's pass rate with its 95 % interval.")
    significance: Significance = Field(
        description="B - A on pass fractions: exact McNemar for one repeat, else a paired "
        "sign-flip permutation test; verdict `worse`, `better` or `no_detectable_difference`."
    )
    scores: Significance | None = Field(
        description="The same on mean scores (permutation test), when the grader gives more "
        "than pass or fail."
    )
    only_a: int = Field(description="Cases settled in A only: counted apart, not paired.")
    only_b: int = Field(description="Cases settled in B only: counted apart, not paired.")

    @classmethod
    def of(cls, numbers: Numbers) -> CompareNumbers:
        return cls(
            sentence=numbers.sentence,
            a=numbers.a,
            b=numbers.b,
            significance=numbers.significance,
            scores=numbers.scores,
            only_a=numbers.only_a,
            only_b=numbers.only_b,
        )


class CompareReply(Reply):
    """Run B against baseline A: whether B differs beyond noise (`numbers`), then case by case
    on pass fractions, regressions first, a page of cases at a time (`counts` are every
    case's)."""

    a: RunRef
    b: RunRef
    numbers: CompareNumbers
    counts: dict[str, int] = Field(
        description="Every case's change counted: regressed, fixed, changed, missing, "
        "unchanged, and the cases whose agent changed a protected path in A and in B."
    )
    cases: int = Field(description="The cases in either run, every page together.")
    page: int = Field(description="This page of cases, from 1.")
    pages: int
    next_page: int | None = Field(description="The `page` that lists the cases after these.")
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
            numbers=CompareNumbers.of(comparison.numbers),
            counts=comparison.counts,
            cases=comparison.cases,
            page=comparison.page,
            pages=comparison.pages,
            next_page=comparison.next_page,
            regressions=groups[REGRESSED],
            fixes=groups[FIXED],
            changed=groups[CHANGED],
            missing=groups[MISSING],
            unchanged=[item.case for item in groups[UNCHANGED]],
            confined=confined_regressions(comparison),
        )
