"""Whether run B differs from run A on the cases both settled, paired by case.

One repeat of pass/fail: exact McNemar on the discordant pairs. Otherwise a paired permutation
test that flips the sign of each case's difference B - A (of pass fractions, or of mean
scores): exact over every sign vector while there are few non-zero differences, a seeded Monte
Carlo beyond. The difference's interval is a seeded paired bootstrap over cases.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from statistics import NormalDist

import numpy as np

from scorecards.numbers.figures import CaseTest, Method, Significance, Verdict
from scorecards.numbers.intervals import SEED, bootstrap_interval
from scorecards.numbers.resampling import Floats, all_flipped_sums, flipped_sums
from scorecards.numbers.tallies import Tallied, fractions, mean_scores

ALPHA = 0.05
POWER = 0.8
# 2^16 sign vectors cost about what the Monte Carlo draws do: enumerate them up to there.
EXACT_UP_TO = 16
PERMUTATIONS = 10_000
# The same differences summed in another order differ by rounding: sums closer than this share
# of the differences' total size are the same sum.
_TIE = 1e-9
_Z_SUM = NormalDist().inv_cdf(1 - ALPHA / 2) + NormalDist().inv_cdf(POWER)
_PP_DIGITS = 2


def compare_passes(*, a: Sequence[Tallied], b: Sequence[Tallied], seed: int = SEED) -> Significance:
    """Compare B's passes with A's, case i of A paired with case i of B: exact McNemar when
    every case settled once in both runs, else the permutation test on pass fractions."""
    _check_paired(a, b)
    differences = fractions(b) - fractions(a)
    if all(t.settled == 1 for t in (*a, *b)):
        better = int(np.count_nonzero(differences > 0))
        worse = int(np.count_nonzero(differences < 0))
        return _significance(differences, "mcnemar_exact", mcnemar_p(better, worse), seed)
    p_value = sign_flip_p(differences, seed=seed)
    return _significance(differences, "paired_permutation", p_value, seed)


def compare_scores(*, a: Sequence[Tallied], b: Sequence[Tallied], seed: int = SEED) -> Significance:
    """Compare B's mean scores with A's, case i of A paired with case i of B, by the
    permutation test."""
    _check_paired(a, b)
    differences = mean_scores(b) - mean_scores(a)
    p_value = sign_flip_p(differences, seed=seed)
    return _significance(differences, "paired_permutation", p_value, seed)


def _check_paired(a: Sequence[Tallied], b: Sequence[Tallied]) -> None:
    if len(a) != len(b):
        raise ValueError(f"{len(a)} cases of A paired with {len(b)} of B")
    if not all(t.settled for t in (*a, *b)):
        raise ValueError("a paired case has no settled result")


def mcnemar_p(better: int, worse: int) -> float:
    """Two-sided exact McNemar p-value: the discordant pairs' split against a fair coin."""
    if better + worse == 0:
        return 1.0
    from scipy.stats import binomtest  # a compare's own: most of a second to import

    return float(binomtest(better, better + worse).pvalue)


def sign_flip_p(differences: Floats, *, seed: int = SEED) -> float:
    """Two-sided p-value of the paired permutation test of the sum of the differences: the
    share of sign flips whose sum is at least as far from zero as the observed one."""
    magnitudes = np.abs(differences[differences != 0])
    if len(magnitudes) == 0:
        return 1.0
    observed = abs(float(np.sort(differences).sum())) - _TIE * float(magnitudes.sum())
    if len(magnitudes) <= EXACT_UP_TO:
        sums = all_flipped_sums(magnitudes)
        return float(np.count_nonzero(np.abs(sums) >= observed)) / len(sums)
    sums = flipped_sums(magnitudes, draws=PERMUTATIONS, seed=seed)
    # The observed signs count as one draw, so a Monte Carlo p-value is never zero.
    return (1 + float(np.count_nonzero(np.abs(sums) >= observed))) / (1 + PERMUTATIONS)


def detectable_pp(differences: Floats) -> float | None:
    """The smallest mean difference these pairs detect with 80 % power at alpha = 0.05, in
    percentage points: (z₀.₉₇₅ + z₀.₈)·√(Σ dᵢ²)/n.

    √(Σ dᵢ²)/n is the standard deviation of the mean difference when each difference's sign is
    a coin flip, the null hypothesis of both tests. For pass/fail pairs each dᵢ is -1, 0 or 1,
    so Σ dᵢ² counts the d discordant pairs and the formula is McNemar's (z₀.₉₇₅ + z₀.₈)·√d/n.
    None when no pair differs: the pairs carry no spread to size a difference by."""
    spread = float(np.sum(np.square(differences)))
    if spread == 0:
        return None
    return round(_Z_SUM * math.sqrt(spread) / len(differences) * 100, _PP_DIGITS)


def _significance(differences: Floats, method: Method, p_value: float, seed: int) -> Significance:
    if len(differences) == 0:
        return Significance(
            pairs=0,
            discordant=0,
            delta_pp=None,
            ci_pp=None,
            p_value=None,
            method=None,
            verdict="no_detectable_difference",
            detectable_pp=None,
        )
    delta = float(differences.mean()) * 100
    ci = bootstrap_interval(differences * 100, seed=seed)
    return Significance(
        pairs=len(differences),
        discordant=int(np.count_nonzero(differences)),
        delta_pp=round(delta, _PP_DIGITS),
        ci_pp=None if ci is None else (round(ci[0], _PP_DIGITS), round(ci[1], _PP_DIGITS)),
        p_value=p_value,
        method=method,
        verdict=_verdict(delta, p_value),
        detectable_pp=detectable_pp(differences),
    )


def _verdict(delta: float, p_value: float) -> Verdict:
    if p_value > ALPHA or delta == 0:
        return "no_detectable_difference"
    return "better" if delta > 0 else "worse"


def case_tests(*, a: Sequence[Tallied], b: Sequence[Tallied]) -> list[CaseTest]:
    """Fisher's exact test of each case's passes and failures in A against B (case i of A
    paired with case i of B), marked where it survives a Benjamini-Hochberg correction at
    5 % false discoveries over the cases given: give the regressed and fixed ones."""
    _check_paired(a, b)
    p_values = [
        _fisher(x.passes, x.settled - x.passes, y.passes, y.settled - y.passes)
        for x, y in zip(a, b, strict=True)
    ]
    if not p_values:
        return []
    from scipy.stats import false_discovery_control

    adjusted = false_discovery_control(p_values, method="bh")
    # Thousands a compare, each two plain numbers made here: not validated again.
    return [
        CaseTest.model_construct(p_value=float(p), fdr_significant=bool(q <= ALPHA))
        for p, q in zip(p_values, adjusted, strict=True)
    ]


# A case's table is four small counts: a compare of 10,000 cases has few distinct ones.
@lru_cache(maxsize=4096)
def _fisher(passes_a: int, fails_a: int, passes_b: int, fails_b: int) -> float:
    from scipy.stats import fisher_exact

    return float(fisher_exact([[passes_a, fails_a], [passes_b, fails_b]]).pvalue)
