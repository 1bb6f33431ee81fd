"""A run's figures with their 95 % intervals, pinned to values worked out by hand."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from scorecards.numbers import (
    CaseTally,
    bootstrap_interval,
    mean_score_estimate,
    pair_by_key,
    pass_rate_estimate,
    wilson_interval,
)

pytestmark = pytest.mark.once

Z = 1.959963984540054  # the normal's 97.5th percentile


def _tally(passes: int, settled: int, score_sum: float = 0.0) -> CaseTally:
    return CaseTally(passes=passes, settled=settled, score_sum=score_sum)


def test_the_wilson_interval_of_7_of_10() -> None:
    # p̂ = 0.7, z² = 3.841459; centre (0.7 + z²/20) / (1 + z²/10) = 0.644493,
    # half-width z·√(0.7·0.3/10 + z²/400) / (1 + z²/10) = 0.247715 → [0.3968, 0.8922].
    assert wilson_interval(passes=7, trials=10) == (0.3968, 0.8922)


def test_the_wilson_interval_of_all_passed_stops_at_one() -> None:
    # At p̂ = 1 the lower end is n / (n + z²) = 10 / 13.841459.
    assert wilson_interval(passes=10, trials=10) == (round(10 / (10 + Z * Z), 4), 1.0)
    assert wilson_interval(passes=0, trials=10) == (0.0, round(1 - 10 / (10 + Z * Z), 4))


def test_the_wilson_interval_is_scipys_for_every_count_up_to_60_trials() -> None:
    from scipy.stats import binomtest

    for trials in range(1, 61):
        for passes in range(trials + 1):
            ci = binomtest(passes, trials).proportion_ci(confidence_level=0.95, method="wilson")
            expected = (round(float(ci.low), 4), round(float(ci.high), 4))
            assert wilson_interval(passes=passes, trials=trials) == expected, (passes, trials)


def test_no_trial_has_no_interval() -> None:
    assert wilson_interval(passes=0, trials=0) is None


def test_one_repeat_takes_wilson_counting_an_error_as_not_passing() -> None:
    verdicts = ["pass"] * 7 + ["fail"] * 2 + ["error"]
    tallies = [CaseTally.of_results([(v, 1.0 if v == "pass" else 0.0)]) for v in verdicts]
    judging = CaseTally.of_results([("judging", 0.0)])
    skipped = CaseTally.of_results([("skipped", 0.0)])

    estimate = pass_rate_estimate([*tallies, judging, skipped])

    assert estimate.value == 0.7
    assert estimate.ci == (0.3968, 0.8922)
    assert estimate.method == "wilson"
    assert (estimate.cases, estimate.unsettled) == (10, 2)
    assert (estimate.judging, estimate.skipped) == (1, 1)


def test_repeats_take_the_bootstrap_of_the_mean_pass_fraction_over_cases() -> None:
    # A case that settled once and is still judging its second repeat counts 1 of 1.
    half_judged = CaseTally.of_results([("pass", 1.0), ("judging", 0.0)])
    tallies = [_tally(3, 5), _tally(5, 5), _tally(0, 5), _tally(1, 5), half_judged]

    estimate = pass_rate_estimate(tallies)

    assert estimate.value == round((0.6 + 1 + 0 + 0.2 + 1) / 5, 4)
    assert estimate.method == "bootstrap"
    assert estimate.ci is not None
    assert estimate.ci[0] <= estimate.value <= estimate.ci[1]
    assert (estimate.cases, estimate.judging) == (5, 1)


def _normal_interval(values: np.ndarray) -> tuple[float, float]:
    spread = Z * values.std(ddof=1) / math.sqrt(len(values))
    return float(values.mean() - spread), float(values.mean() + spread)


def test_the_bootstrap_of_repeating_values_agrees_with_the_normal_interval() -> None:
    # 2,000 pass fractions over five repeats (six values): the bootstrap draws by value. With
    # this many cases the mean is normal, so the percentile interval is the mean ± z·s/√n.
    values = np.random.default_rng(7).binomial(5, 0.6, 2_000) / 5

    lo, hi = bootstrap_interval(values) or (0.0, 0.0)

    expected = _normal_interval(values)
    assert lo == pytest.approx(expected[0], abs=0.001)
    assert hi == pytest.approx(expected[1], abs=0.001)


def test_the_bootstrap_of_distinct_values_agrees_with_the_normal_interval() -> None:
    # 2,000 scores, all distinct: the bootstrap draws case by case.
    values = np.random.default_rng(8).random(2_000)

    lo, hi = bootstrap_interval(values) or (0.0, 0.0)

    expected = _normal_interval(values)
    assert lo == pytest.approx(expected[0], abs=0.001)
    assert hi == pytest.approx(expected[1], abs=0.001)


def test_the_same_cases_give_the_same_interval_whatever_their_order() -> None:
    rng = random.Random(3)
    tallies = [_tally(rng.randint(0, 5), 5, rng.random() * 5) for _ in range(500)]
    shuffled = rng.sample(tallies, len(tallies))

    assert pass_rate_estimate(tallies) == pass_rate_estimate(tallies)
    assert pass_rate_estimate(shuffled) == pass_rate_estimate(tallies)
    assert mean_score_estimate(shuffled) == mean_score_estimate(tallies)


def test_the_seed_is_what_fixes_the_interval() -> None:
    values = np.random.default_rng(9).random(50)

    assert bootstrap_interval(values, seed=1) == bootstrap_interval(values, seed=1)
    assert bootstrap_interval(values, seed=1) != bootstrap_interval(values, seed=2)


def test_the_mean_score_is_over_cases_each_averaged_over_its_repeats() -> None:
    # Case means 0.5, 1.0 and 0.25: the run's mean score is their mean, 0.5833.
    tallies = [_tally(1, 2, 1.0), _tally(1, 1, 1.0), _tally(1, 4, 1.0)]

    estimate = mean_score_estimate(tallies)

    assert estimate.value == 0.5833
    assert estimate.method == "bootstrap"
    assert estimate.ci is not None
    assert 0.25 <= estimate.ci[0] <= estimate.value <= estimate.ci[1] <= 1.0


def test_identical_cases_have_an_interval_of_one_point() -> None:
    assert bootstrap_interval(np.full(30, 0.4)) == (0.4, 0.4)
    assert pass_rate_estimate([_tally(2, 5)] * 30).ci == (0.4, 0.4)


def test_one_case_has_a_figure_and_no_bootstrap_interval() -> None:
    estimate = mean_score_estimate([_tally(1, 3, 2.0)])

    assert (estimate.value, estimate.ci, estimate.method) == (0.6667, None, None)


def test_a_run_with_nothing_settled_has_no_figure() -> None:
    tallies = [CaseTally.of_results([("judging", 0.0), ("skipped", 0.0)])] * 3

    for estimate in (pass_rate_estimate(tallies), mean_score_estimate(tallies)):
        assert (estimate.value, estimate.ci, estimate.method) == (None, None, None)
        assert (estimate.cases, estimate.unsettled) == (0, 3)
        assert (estimate.judging, estimate.skipped) == (3, 3)


def test_a_tally_refuses_what_is_not_a_case() -> None:
    with pytest.raises(ValueError, match="unknown verdict 'maybe'"):
        CaseTally.of_results([("maybe", 1.0)])
    with pytest.raises(ValueError, match="not a case's tally"):
        CaseTally(passes=3, settled=2)
    with pytest.raises(ValueError, match="not a case's tally"):
        CaseTally(passes=-1, settled=2)


def test_cases_pair_by_key_and_the_others_are_counted_apart() -> None:
    unsettled = CaseTally.of_results([("judging", 0.0)])
    a = {"c": _tally(1, 1), "a": _tally(0, 1), "only-a": _tally(1, 1), "judging": _tally(1, 1)}
    b = {"a": _tally(1, 1), "c": _tally(1, 1), "only-b": _tally(0, 1), "judging": unsettled}

    pairs = pair_by_key(a=a, b=b)

    assert pairs.keys == ["a", "c"]
    assert pairs.a == [a["a"], a["c"]]
    assert pairs.b == [b["a"], b["c"]]
    # "judging" has no settled result in B: A alone settled it.
    assert (pairs.only_a, pairs.only_b) == (2, 1)
