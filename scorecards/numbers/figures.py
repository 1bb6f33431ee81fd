"""The numbers as they travel: a run's figure with its interval, and the paired comparison of
two runs (the summary's `pass_rate_ci` and `mean_score_ci`, compare's `significance`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Bounds = tuple[float, float]
Method = Literal["mcnemar_exact", "paired_permutation"]
Verdict = Literal["worse", "better", "no_detectable_difference"]


class Figure(BaseModel):
    model_config = ConfigDict(frozen=True)


class Estimate(Figure):
    """A run's pass rate or mean score (0 to 1) over its cases, with its 95 % interval."""

    value: float | None = Field(description="None when no case has a settled result.")
    ci: Bounds | None = Field(description="[lo, hi]; None below the cases an interval needs.")
    method: Literal["wilson", "bootstrap"] | None = Field(
        description="wilson: on the pass rate of a run of one repeat; bootstrap: percentile "
        "bootstrap over cases of the mean pass fraction or mean score."
    )
    cases: int = Field(description="Cases with at least one settled result.")
    unsettled: int = Field(description="Cases left out: none of their results settled.")
    judging: int = Field(description="Results left out: still being judged.")
    skipped: int = Field(description="Results left out: skipped, never run.")


class Significance(Figure):
    """Run B against run A on the cases both settled: the difference B - A, its interval, the
    p-value of a paired test and what these pairs could detect."""

    pairs: int
    discordant: int = Field(description="Pairs whose values differ between A and B.")
    delta_pp: float | None = Field(description="Mean of B - A, in percentage points.")
    ci_pp: Bounds | None = Field(description="95 % paired bootstrap interval of delta_pp.")
    p_value: float | None
    method: Method | None = Field(description="None when there are no paired cases.")
    verdict: Verdict = Field(description="worse or better when p ≤ 0.05, by the sign of delta.")
    detectable_pp: float | None = Field(
        description="The smallest difference these pairs detect with 80 % power at alpha = 0.05; "
        "None when no pair differs."
    )


class CaseTest(Figure):
    """One changed case of a compare with repeats: Fisher's exact test of its passes in A
    against B, and whether it survives the Benjamini-Hochberg correction over the changed
    cases."""

    p_value: float
    fdr_significant: bool
