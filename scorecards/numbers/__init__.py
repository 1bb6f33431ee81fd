"""Intervals of a run's figures and the paired significance of a compare: pure functions over
per-case tallies (numpy and scipy, no database), seeded so the same runs give the same numbers."""

from __future__ import annotations

from scorecards.numbers.figures import Bounds, CaseTest, Estimate, Significance
from scorecards.numbers.intervals import (
    RESAMPLES,
    SEED,
    bootstrap_interval,
    mean_score_estimate,
    pass_rate_estimate,
    wilson_interval,
)
from scorecards.numbers.sentences import compare_sentence, estimate_text, significance_text
from scorecards.numbers.significance import (
    ALPHA,
    EXACT_UP_TO,
    PERMUTATIONS,
    case_tests,
    compare_passes,
    compare_scores,
    detectable_pp,
    mcnemar_p,
    sign_flip_p,
)
from scorecards.numbers.tallies import CaseTally, Pairs, Tallied, pair_by_key

__all__ = [
    "ALPHA",
    "EXACT_UP_TO",
    "PERMUTATIONS",
    "RESAMPLES",
    "SEED",
    "Bounds",
    "CaseTally",
    "CaseTest",
    "Estimate",
    "Pairs",
    "Significance",
    "Tallied",
    "bootstrap_interval",
    "case_tests",
    "compare_passes",
    "compare_scores",
    "compare_sentence",
    "detectable_pp",
    "estimate_text",
    "mcnemar_p",
    "mean_score_estimate",
    "pair_by_key",
    "pass_rate_estimate",
    "sign_flip_p",
    "significance_text",
    "wilson_interval",
]
