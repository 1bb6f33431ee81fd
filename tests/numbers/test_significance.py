"""Run B against run A, paired by case, pinned to values worked out by hand."""

from __future__ import annotations

import math
import random
from itertools import product

import numpy as np
import pytest
from scipy.stats import permutation_test

from scorecards.numbers import (
    EXACT_UP_TO,
    PERMUTATIONS,
    CaseTally,
    Estimate,
    Significance,
    case_tests,
    compare_passes,
    compare_scores,
    compare_sentence,
    detectable_pp,
    mcnemar_p,
    pass_rate_estimate,
    sign_flip_p,
)

pytestmark = pytest.mark.once

Z_SUM = 1.959963984540054 + 0.8416212335729143  # z at 0.975 plus z at 0.8


def _once(verdicts: str) -> list[CaseTally]:
    """One repeat per case: `p` passed, `f` did not."""
    return [CaseTally(passes=int(v == "p"), settled=1) for v in verdicts]


def _of_five(passes: list[int]) -> list[CaseTally]:
    return [CaseTally(passes=p, settled=5) for p in passes]


# 40 pairs of one repeat: 9 regressed (A passed, B failed), 1 fixed, 30 unchanged.
A_9_1 = _once("p" * 9 + "f" + "p" * 20 + "f" * 10)
B_9_1 = _once("f" * 9 + "p" + "p" * 20 + "f" * 10)


def test_mcnemar_of_a_9_to_1_split_is_22_in_1024() -> None:
    # Under the null each discordant pair is a fair coin: P(≤ 1 of 10) = (1 + 10) / 1024, and
    # two-sided doubles it.
    assert mcnemar_p(1, 9) == 22 / 1024
    assert mcnemar_p(9, 1) == 22 / 1024
    assert mcnemar_p(0, 0) == 1.0


def test_a_one_repeat_compare_is_mcnemar_on_the_discordant_pairs() -> None:
    significance = compare_passes(a=A_9_1, b=B_9_1)

    assert significance.method == "mcnemar_exact"
    assert significance.p_value == 22 / 1024 == 0.021484375
    assert (significance.pairs, significance.discordant) == (40, 10)
    assert significance.delta_pp == -20.0  # (1 - 9) / 40
    assert significance.verdict == "worse"
    # (z₀.₉₇₅ + z₀.₈)·√10 / 40
    assert significance.detectable_pp == round(Z_SUM * math.sqrt(10) / 40 * 100, 2) == 22.15
    assert significance.ci_pp is not None
    assert significance.ci_pp[0] <= -20.0 <= significance.ci_pp[1] < 0


def test_the_mirror_compare_is_better_with_the_same_p() -> None:
    significance = compare_passes(a=B_9_1, b=A_9_1)

    assert (significance.verdict, significance.delta_pp) == ("better", 20.0)
    assert significance.p_value == 22 / 1024


def test_nine_discordant_of_40_detect_21_points_and_a_7_to_2_split_is_noise() -> None:
    a = _once("p" * 7 + "f" * 2 + "p" * 31)
    b = _once("f" * 7 + "p" * 2 + "p" * 31)

    significance = compare_passes(a=a, b=b)

    # (z₀.₉₇₅ + z₀.₈)·√9 / 40 = 2.8016 · 3 / 40 = 0.2101.
    assert significance.detectable_pp == 21.01
    # Two-sided: 2 · (C(9,0) + C(9,1) + C(9,2)) / 2⁹ = 2 · 46 / 512.
    assert significance.p_value == 92 / 512
    assert significance.delta_pp == -12.5
    assert significance.verdict == "no_detectable_difference"


# Six cases over five repeats; B - A in passes: +3, +2, +1, +1, -1 and a tie.
A_SMALL = _of_five([1, 2, 2, 3, 4, 2])
B_SMALL = _of_five([4, 4, 3, 4, 3, 2])


def test_the_permutation_p_value_of_five_differences_counted_by_hand() -> None:
    # In fifths, the non-zero magnitudes are 3, 2, 1, 1, 1 (total 8) and the observed sum is 6.
    # Flipping a set of magnitudes summing to N gives 8 - 2N, so |sum| ≥ 6 when N ≤ 1 or
    # N ≥ 7: N = 0 (no flip, 1 way), N = 1 (one of the three 1s, 3 ways), and their
    # complements N = 8 and N = 7 (4 ways): 8 of the 2⁵ = 32 sign vectors. The tie changes no
    # sum, whatever its sign.
    significance = compare_passes(a=A_SMALL, b=B_SMALL)

    assert significance.method == "paired_permutation"
    assert significance.p_value == 8 / 32
    assert (significance.pairs, significance.discordant) == (6, 5)
    assert significance.delta_pp == 20.0  # (6 / 5) / 6
    assert significance.verdict == "no_detectable_difference"


def test_a_flipped_sum_equal_to_the_observed_one_counts_though_added_in_another_order() -> None:
    # Seven repeats; B - A: -7/7, +4/7, -6/7, observed |-9/7|. The 8 sign vectors sum to
    # ±17/7, ±9/7, ±5/7 and ±3/7: 4 of 8 are at least 9/7 from zero. In floating point,
    # 1 - 4/7 + 6/7 and 1 + 6/7 - 4/7 are not the same number.
    significance = compare_passes(
        a=[CaseTally(passes=p, settled=7) for p in (7, 0, 6)],
        b=[CaseTally(passes=p, settled=7) for p in (0, 4, 0)],
    )

    assert significance.p_value == 4 / 8


def test_flipped_sums_of_thirds_count_as_whole_numbers_do() -> None:
    # Counted in whole thirds, where no sum is rounded.
    thirds = [-2, 3, -2, -3, -2, 1, 3, -1]
    exact = sum(
        abs(sum(sign * abs(k) for sign, k in zip(signs, thirds, strict=True))) >= abs(sum(thirds))
        for signs in product((-1, 1), repeat=len(thirds))
    ) / 2 ** len(thirds)

    assert sign_flip_p(np.array(thirds) / 3) == exact == 97 / 128


def test_the_permutation_p_value_is_scipys_exact_one_on_the_same_pairs() -> None:
    a = np.array([t.fraction for t in A_SMALL])
    b = np.array([t.fraction for t in B_SMALL])

    def mean_difference(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
        return np.mean(y - x, axis=axis)

    # "samples" swaps each pair's two values: the sign flip of its difference. It enumerates
    # the tie's swaps too, each giving the same sum twice, which leaves the share unchanged.
    theirs = permutation_test(
        (a, b), mean_difference, permutation_type="samples", n_resamples=np.inf
    )

    assert sign_flip_p(b - a) == pytest.approx(theirs.pvalue, abs=1e-12)


def test_a_sign_flip_of_pass_fail_differences_is_mcnemar() -> None:
    # Scores of 1 and 0: each difference is +1, -1 or 0, and flipping their signs is the
    # discordant pairs' fair coin.
    a = [CaseTally(passes=t.passes, settled=1, score_sum=t.passes) for t in A_9_1]
    b = [CaseTally(passes=t.passes, settled=1, score_sum=t.passes) for t in B_9_1]

    significance = compare_scores(a=a, b=b)

    assert significance.method == "paired_permutation"
    assert significance.p_value == 22 / 1024
    assert significance.detectable_pp == compare_passes(a=A_9_1, b=B_9_1).detectable_pp


def test_the_detectable_difference_of_a_permutation_is_from_the_differences_spread() -> None:
    # Differences 0.6, 0.4, 0.2, 0.2, -0.2, 0: Σ d² = 0.64, √0.64 / 6 = 0.1333, x 2.8016.
    differences = np.array([0.6, 0.4, 0.2, 0.2, -0.2, 0.0])

    assert detectable_pp(differences) == round(Z_SUM * 0.8 / 6 * 100, 2) == 37.35
    assert compare_passes(a=A_SMALL, b=B_SMALL).detectable_pp == 37.35


def _exact_share(units: list[int], observed: int) -> float:
    """Share of sign vectors of integer magnitudes whose sum is at least |observed| away from
    zero, counted over subset sums (the flipped set's total decides the sum)."""
    ways = {0: 1}
    for unit in units:
        grown = dict(ways)
        for total, count in ways.items():
            grown[total + unit] = grown.get(total + unit, 0) + count
        ways = grown
    whole = sum(units)
    hits = sum(count for n, count in ways.items() if abs(whole - 2 * n) >= abs(observed))
    return hits / 2 ** len(units)


def test_the_monte_carlo_permutation_of_many_repeating_differences_is_near_the_exact_one() -> None:
    # 200 differences in fifths (100 of ±1, 60 of ±2, 40 of ±3): beyond enumeration, drawn
    # by value. Observed: 56 - 44 = 12, 2·(33 - 27) = 12 and 3·(22 - 18) = 12, 36 fifths.
    signed = [1] * 56 + [-1] * 44 + [2] * 33 + [-2] * 27 + [3] * 22 + [-3] * 18
    exact = _exact_share([abs(s) for s in signed], sum(signed))

    p_value = sign_flip_p(np.array(signed) / 5)

    # The Monte Carlo's standard error at 10,000 draws is about 0.004.
    assert exact == pytest.approx(0.1862, abs=1e-4)
    assert p_value == pytest.approx(exact, abs=0.01)


def test_the_monte_carlo_permutation_of_distinct_differences_is_near_the_exact_one() -> None:
    # 18 distinct differences (hundredths): beyond enumeration, drawn case by case.
    signed = [1, -2, 3, 4, -5, 6, 7, 8, -9, 10, 11, -12, 13, 14, 15, -16, 17, 18]
    exact = _exact_share([abs(s) for s in signed], sum(signed))

    p_value = sign_flip_p(np.array(signed) / 100)

    assert 0.01 < exact < 0.2
    assert p_value == pytest.approx(exact, abs=0.01)


def test_a_monte_carlo_p_value_is_never_zero() -> None:
    differences = np.linspace(0.01, 0.4, 40)  # every case better in B

    assert sign_flip_p(differences) == 1 / (1 + PERMUTATIONS)


def test_the_same_pairs_give_the_same_numbers_whatever_their_order() -> None:
    rng = random.Random(5)
    a = _of_five([rng.randint(0, 5) for _ in range(300)])
    b = _of_five([max(0, min(5, t.passes + rng.choice([-1, 0, 0, 1, 1]))) for t in a])
    order = rng.sample(range(300), 300)

    first = compare_passes(a=a, b=b)

    assert compare_passes(a=a, b=b) == first
    assert compare_passes(a=[a[i] for i in order], b=[b[i] for i in order]) == first
    assert first.method == "paired_permutation"
    assert first.discordant > EXACT_UP_TO


def test_no_paired_cases_say_so_without_dividing_by_zero() -> None:
    for significance in (compare_passes(a=[], b=[]), compare_scores(a=[], b=[])):
        assert significance.pairs == 0
        assert significance.delta_pp is None
        assert significance.ci_pp is None
        assert significance.p_value is None
        assert significance.detectable_pp is None
        assert significance.verdict == "no_detectable_difference"


@pytest.mark.parametrize("passes", [[1] * 40, [3, 0, 5, 2] * 10])
def test_all_ties_are_no_difference_with_nothing_to_detect(passes: list[int]) -> None:
    settled = 1 if max(passes) == 1 else 5
    tallies = [CaseTally(passes=p, settled=settled, score_sum=p / 2) for p in passes]

    for significance in (
        compare_passes(a=tallies, b=tallies),
        compare_scores(a=tallies, b=tallies),
    ):
        assert significance.p_value == 1.0
        assert (significance.pairs, significance.discordant) == (40, 0)
        assert (significance.delta_pp, significance.ci_pp) == (0.0, (0.0, 0.0))
        assert significance.detectable_pp is None
        assert significance.verdict == "no_detectable_difference"


def test_pairs_must_line_up_and_be_settled() -> None:
    with pytest.raises(ValueError, match="2 cases of A paired with 1 of B"):
        compare_passes(a=_once("pp"), b=_once("p"))
    with pytest.raises(ValueError, match="no settled result"):
        compare_scores(a=[CaseTally(passes=0, settled=0)], b=_once("p"))


def test_fisher_per_case_and_the_benjamini_hochberg_mark() -> None:
    # Fisher's two-sided p of each case's passes of 5 in A against B (hypergeometric tables):
    # 5 vs 0: 2 / C(10,5) = 2/252; 4 vs 0: (5 + 5) / C(10,4) = 10/210; 3 vs 0: (10 + 10) /
    # C(10,3) = 20/120; 0 vs 4: 10/210.
    a = _of_five([5, 4, 3, 0])
    b = _of_five([0, 0, 0, 4])

    tests = case_tests(a=a, b=b)

    assert [t.p_value for t in tests] == pytest.approx([2 / 252, 10 / 210, 20 / 120, 10 / 210])
    # BH over 4: sorted 0.0079, 0.0476, 0.0476, 0.1667 adjust to min over later ranks of
    # p·4/rank: 0.0317, 0.0635, 0.0635, 0.1667. Only the first stays at or under 0.05.
    assert [t.fdr_significant for t in tests] == [True, False, False, False]


def test_benjamini_hochberg_keeps_a_case_among_fewer() -> None:
    # The same 4-of-5 case beside the 5-of-5 one alone: 10/210 · 2/2 = 0.0476 ≤ 0.05.
    tests = case_tests(a=_of_five([5, 4]), b=_of_five([0, 0]))

    assert [t.fdr_significant for t in tests] == [True, True]
    assert case_tests(a=[], b=[]) == []


def _estimate(value: float, lo: float, hi: float) -> Estimate:
    return Estimate(
        value=value,
        ci=(lo, hi),
        method="wilson",
        cases=40,
        unsettled=0,
        judging=0,
        skipped=0,
    )


def test_the_sentence_of_a_difference_that_is_noise() -> None:
    significance = Significance(
        pairs=40,
        discordant=9,
        delta_pp=-8.0,
        ci_pp=(-19.0, 3.0),
        p_value=0.18,
        method="mcnemar_exact",
        verdict="no_detectable_difference",
        detectable_pp=21.01,
    )

    sentence = compare_sentence(
        a=_estimate(0.62, 0.48, 0.74), b=_estimate(0.70, 0.56, 0.81), significance=significance
    )

    assert sentence == (
        "pass rate 62 % [48\u201374] vs 70 % [56\u201381]; \u0394 \u22128 pp [\u221219, +3], "
        "p = 0.18 (McNemar, 40 pairs): no detectable difference \u2014 these pairs detect "
        "\u2265 21 pp"
    )


def test_the_sentence_of_a_regression_that_is_real() -> None:
    a, b = A_9_1, B_9_1

    sentence = compare_sentence(
        a=pass_rate_estimate(a),
        b=pass_rate_estimate(b),
        significance=compare_passes(a=a, b=b),
    )

    # 29 and 21 of 40 passed; the interval of -20 is the seeded bootstrap's.
    assert sentence.startswith("pass rate 72 % [")
    assert " vs 52 % [" in sentence
    assert "; \u0394 \u221220 pp [\u2212" in sentence
    assert sentence.endswith("p = 0.021 (McNemar, 40 pairs): B is worse")


def test_the_sentence_of_an_improvement_a_narrow_interval_and_no_pairs() -> None:
    narrow = _estimate(0.6023, 0.5981, 0.6064)
    better = Significance(
        pairs=10_000,
        discordant=4_000,
        delta_pp=2.24,
        ci_pp=(1.61, 2.87),
        p_value=0.00002,
        method="paired_permutation",
        verdict="better",
        detectable_pp=0.9,
    )
    none = compare_passes(a=[], b=[])

    assert compare_sentence(a=narrow, b=narrow, significance=better) == (
        "pass rate 60.2 % [59.8\u201360.6] vs 60.2 % [59.8\u201360.6]; \u0394 +2.2 pp "
        "[+1.6, +2.9], p < 0.001 (paired permutation, 10000 pairs): B is better"
    )
    assert compare_sentence(a=narrow, b=narrow, significance=none, figure="mean score") == (
        "mean score 60.2 % [59.8\u201360.6] vs 60.2 % [59.8\u201360.6]; no paired cases"
    )


def test_one_pair_has_a_difference_and_no_interval() -> None:
    significance = compare_passes(a=_once("p"), b=_once("f"))

    assert (significance.delta_pp, significance.ci_pp, significance.p_value) == (-100.0, None, 1)
    # (z₀.₉₇₅ + z₀.₈)·√1 / 1: more than two pass rates can differ by.
    assert significance.detectable_pp == 280.16
    assert compare_sentence(
        a=pass_rate_estimate(_once("p")),
        b=pass_rate_estimate(_once("f")),
        significance=significance,
    ).endswith(
        "; \u0394 \u2212100 pp, p = 1 (McNemar, 1 pair): no detectable difference \u2014 too "
        "few pairs to detect any"
    )


def test_the_seed_is_what_fixes_a_monte_carlo_p_value_and_the_interval() -> None:
    rng = np.random.default_rng(11)
    a = [CaseTally(passes=1, settled=1, score_sum=float(x)) for x in rng.random(40)]
    b = [CaseTally(passes=1, settled=1, score_sum=float(x)) for x in rng.random(40)]

    first = compare_scores(a=a, b=b, seed=1)

    assert compare_scores(a=a, b=b, seed=1) == first
    other = compare_scores(a=a, b=b, seed=2)
    assert (other.p_value, other.ci_pp) != (first.p_value, first.ci_pp)
    assert other.p_value == pytest.approx(first.p_value, abs=0.02)


def test_the_significance_travels_with_the_fields_compare_replies_carry() -> None:
    data = compare_passes(a=A_9_1, b=B_9_1).model_dump(mode="json")

    assert set(data) == {
        "pairs",
        "discordant",
        "delta_pp",
        "ci_pp",
        "p_value",
        "method",
        "verdict",
        "detectable_pp",
    }
    assert isinstance(data["ci_pp"], list) and len(data["ci_pp"]) == 2
    assert case_tests(a=A_9_1[:1], b=B_9_1[:1])[0].model_dump() == {
        "p_value": 1.0,
        "fdr_significant": False,
    }
