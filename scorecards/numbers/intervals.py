"""95 % intervals of a run's figures: Wilson on a pass rate of one repeat, a seeded percentile
bootstrap over cases otherwise.

The bootstrap resamples cases, not repeats (a case's repeats share its difficulty), and takes
percentiles: BCa's jackknife would cost n² on large runs.

Wilson's interval is its closed form (scipy's `binomtest(…).proportion_ci(method="wilson")`
gives the same, as the tests check): every run summary has one, and importing `scipy.stats`
would add most of a second to every process that serves one, where a compare needs it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from statistics import NormalDist

import numpy as np

from scorecards.numbers.figures import Bounds, Estimate
from scorecards.numbers.resampling import Floats, resampled_means
from scorecards.numbers.tallies import CaseTally, counted, fractions, mean_scores

CONFIDENCE = 0.95
RESAMPLES = 2_000
# Any fixed seed: what matters is that the same run gives the same interval every time.
SEED = 2_718_281
# Fractions keep four decimals, as the run summary's other figures do.
DIGITS = 4
# The normal quantile of a two-sided interval at CONFIDENCE: 1.959964 at 95 %.
_Z = NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)


def wilson_interval(*, passes: int, trials: int) -> Bounds | None:
    """The Wilson score interval of `passes` of `trials` (none without a trial)."""
    if trials == 0:
        return None
    share, z2 = passes / trials, _Z * _Z
    denominator = 2 * (trials + z2)
    centre = (2 * trials * share + z2) / denominator
    half = _Z / denominator * math.sqrt(4 * trials * share * (1 - share) + z2)
    return round(max(0.0, centre - half), DIGITS), round(min(1.0, centre + half), DIGITS)


def bootstrap_interval(
    values: Floats, *, resamples: int = RESAMPLES, seed: int = SEED
) -> Bounds | None:
    """The percentile bootstrap interval of the mean of the values (none below two values,
    where resampling says nothing)."""
    if len(values) < 2:
        return None
    means = resampled_means(values, resamples=resamples, seed=seed)
    tail = (1 - CONFIDENCE) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return round(float(lo), DIGITS), round(float(hi), DIGITS)


def pass_rate_estimate(tallies: Iterable[CaseTally], *, seed: int = SEED) -> Estimate:
    """A run's pass rate and its interval: Wilson on passes of settled cases when every case
    settled once, else the mean pass fraction over cases with a bootstrap over cases."""
    kept, left_out = counted(tallies)
    if all(t.settled == 1 for t in kept):
        passes = sum(t.passes for t in kept)
        ci = wilson_interval(passes=passes, trials=len(kept))
        value = passes / len(kept) if kept else None
        return _estimate(value, ci, "wilson", len(kept), left_out)
    values = fractions(kept)
    ci = bootstrap_interval(values, seed=seed)
    return _estimate(float(values.mean()), ci, "bootstrap", len(kept), left_out)


def mean_score_estimate(tallies: Iterable[CaseTally], *, seed: int = SEED) -> Estimate:
    """A run's mean score over cases (each case's mean over its settled results) and its
    bootstrap interval over cases."""
    kept, left_out = counted(tallies)
    values = mean_scores(kept)
    value = float(values.mean()) if kept else None
    return _estimate(value, bootstrap_interval(values, seed=seed), "bootstrap", len(kept), left_out)


def _estimate(
    value: float | None, ci: Bounds | None, method: str, cases: int, left_out: dict[str, int]
) -> Estimate:
    return Estimate.model_validate(
        {
            "value": None if value is None else round(value, DIGITS),
            "ci": ci,
            "method": method if ci is not None else None,
            "cases": cases,
            **left_out,
        }
    )
