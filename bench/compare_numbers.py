"""The numbers of a compare: the paired test, its interval and the per-case marks of two large
runs, and a run's interval.

In this process, no database: two runs of 10,000 cases with 5 repeats each (flaky cases, B a
little worse), given as the (verdict, score) rows of each case, as the server reads them. The
figure is what a compare computes from the paired cases: the significance (permutation test,
bootstrap interval of the difference), Fisher's test and the Benjamini-Hochberg mark of every
changed case, and the sentence (each run's interval comes from its summary, cached per run and
settlement); then a run's interval computed afresh. Baseline, in the same run: turning the rows
into the paired tallies and per-case arrays the numbers start from, which any compare pays.
The same for one repeat (McNemar) and for continuous scores (every value distinct: the draws go
case by case), and those two draws alone, each beside scipy's own (`scipy.stats.bootstrap`,
`permutation_test`) on the same values. Target: the numbers within half of compare's 1 s (the
rest reads the rows).

    .venv/bin/python bench/compare_numbers.py [--cases 10000] [--repeats 5] [--tries 7]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from report import Summary, finish
from stats import ms, pct

from scorecards.numbers import (
    PERMUTATIONS,
    RESAMPLES,
    SEED,
    CaseTally,
    Estimate,
    Pairs,
    bootstrap_interval,
    case_tests,
    compare_passes,
    compare_scores,
    compare_sentence,
    mean_score_estimate,
    pair_by_key,
    pass_rate_estimate,
    sign_flip_p,
)
from scorecards.numbers.tallies import fractions

TARGET_S = 0.5
Rows = dict[str, list[tuple[str, float]]]


def results(cases: int, repeats: int, shift: float, seed: int, scores: bool) -> Rows:
    """Per case key, its (verdict, score) per repeat: each case passes with a chance of its
    own (a flaky one in between), B's chances `shift` lower."""
    rng = np.random.default_rng(seed)
    chances = np.clip(np.random.default_rng(1).beta(2, 1, cases) - shift, 0, 1)
    draws = rng.random((cases, repeats))
    verdicts = np.where(draws < chances[:, None], "pass", "fail")
    values = rng.random((cases, repeats)) if scores else (verdicts == "pass") * 1.0
    return {
        f"case-{i:05d}": list(zip(verdicts[i].tolist(), values[i].tolist(), strict=True))
        for i in range(cases)
    }


def tallies(rows: Rows) -> dict[str, CaseTally]:
    return {key: CaseTally.of_results(results) for key, results in rows.items()}


def prepared(a: Rows, b: Rows) -> Pairs:
    """The baseline: the rows as tallies, paired by key, and their per-case arrays."""
    pairs = pair_by_key(a=tallies(a), b=tallies(b))
    fractions(pairs.a), fractions(pairs.b)
    return pairs


def pass_numbers(pairs: Pairs, estimates: tuple[Estimate, Estimate]) -> str:
    """What a compare of pass fractions computes from its pairs: the significance, Fisher's
    test and the mark of each changed case (with repeats), the sentence."""
    significance = compare_passes(a=pairs.a, b=pairs.b)
    if any(t.settled > 1 for t in pairs.a):
        changed = [
            (x, y)
            for x, y in zip(pairs.a, pairs.b, strict=True)
            if x.passes / x.settled != y.passes / y.settled
        ]
        case_tests(a=[x for x, _ in changed], b=[y for _, y in changed])
    return compare_sentence(a=estimates[0], b=estimates[1], significance=significance)


def score_numbers(pairs: Pairs, estimates: tuple[Estimate, Estimate]) -> str:
    significance = compare_scores(a=pairs.a, b=pairs.b)
    return compare_sentence(
        a=estimates[0], b=estimates[1], significance=significance, figure="mean score"
    )


def timed(fn: Callable[[], Any], tries: int) -> tuple[list[float], Any]:
    seconds, value = [], None
    for _ in range(tries):
        began = time.perf_counter()
        value = fn()
        seconds.append(time.perf_counter() - began)
    return seconds, value


def add_row(summary: Summary, figure: str, value: list[float], baseline: list[float]) -> None:
    mine, theirs = pct(value, 50), pct(baseline, 50)
    summary.add(
        benchmark="numbers",
        figure=figure,
        value=f"p50 {ms(mine)}, max {ms(max(value))}",
        baseline=f"p50 {ms(theirs)}",
        ratio=f"{mine / theirs:.2f}x" if theirs else "-",
        target=f"<= {TARGET_S * 1000:.0f} ms",
        met=mine <= TARGET_S,
    )


def compare_figures(summary: Summary, args: argparse.Namespace) -> None:
    n, r = args.cases, args.repeats
    compare_figure(summary, args, f"compare {n:,} cases x {r} repeats, pass fractions", r, False)
    compare_figure(summary, args, f"compare {n:,} cases x 1 repeat, McNemar", 1, False)
    compare_figure(summary, args, f"compare {n:,} cases x {r} repeats, distinct scores", r, True)


def compare_figure(
    summary: Summary, args: argparse.Namespace, figure: str, repeats: int, scores: bool
) -> None:
    a = results(args.cases, repeats, 0.0, 2, scores)
    b = results(args.cases, repeats, 0.01, 3, scores)
    baseline, pairs = timed(lambda: prepared(a, b), args.tries)
    # Each run's figure is the summary's, cached per run and settlement: computed once here.
    estimate = mean_score_estimate if scores else pass_rate_estimate
    estimates = estimate(pairs.a), estimate(pairs.b)
    numbers = score_numbers if scores else pass_numbers
    value, sentence = timed(lambda: numbers(pairs, estimates), args.tries)
    print(f"{figure}: {sentence}")
    print(f"  {latency(value)}; rows to arrays: {latency(baseline)}")
    add_row(summary, figure, value, baseline)
    if not scores:
        value, _ = timed(lambda: estimate(pairs.b), args.tries)
        figure = f"a run's pass rate interval, {args.cases:,} cases x {repeats}"
        print(f"{figure}: {latency(value)}")
        add_row(summary, figure, value, baseline)


def latency(seconds: list[float]) -> str:
    return f"p50 {ms(pct(seconds, 50))}, max {ms(max(seconds))}"


def draw_figures(summary: Summary, args: argparse.Namespace) -> None:
    values = np.random.default_rng(4).random(args.cases)
    differences = values - np.random.default_rng(5).random(args.cases)
    mine, interval = timed(lambda: bootstrap_interval(values), args.tries)
    theirs, their_interval = timed(lambda: scipy_bootstrap(values), max(1, args.tries // 3))
    figure = f"bootstrap interval, {args.cases:,} distinct x {RESAMPLES:,} resamples"
    print(f"{figure}: {interval} in {latency(mine)}")
    print(f"  scipy.stats.bootstrap: ({their_interval[0]:.4f}, {their_interval[1]:.4f})", end="")
    print(f" in {latency(theirs)}")
    add_row(summary, figure, mine, theirs)
    mine, p_value = timed(lambda: sign_flip_p(differences), args.tries)
    theirs, their_p = timed(lambda: scipy_permutation(differences), 1)
    figure = f"sign-flip p, {args.cases:,} distinct x {PERMUTATIONS:,} draws"
    print(f"{figure}: p = {p_value:.4f} in {latency(mine)}")
    print(f"  scipy.stats.permutation_test: p = {their_p:.4f} in {latency(theirs)}")
    add_row(summary, figure, mine, theirs)


def scipy_bootstrap(values: np.ndarray) -> Any:
    return stats.bootstrap(
        (values,),
        np.mean,
        n_resamples=RESAMPLES,
        method="percentile",
        vectorized=True,
        batch=200,
        rng=np.random.default_rng(SEED),
    ).confidence_interval


def scipy_permutation(differences: np.ndarray) -> float:
    def mean_difference(x: np.ndarray, y: np.ndarray, axis: int) -> np.ndarray:
        return np.mean(y - x, axis=axis)

    return float(
        stats.permutation_test(
            (np.zeros_like(differences), differences),
            mean_difference,
            permutation_type="samples",
            n_resamples=PERMUTATIONS,
            batch=200,
            rng=np.random.default_rng(SEED),
        ).pvalue
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tries", type=int, default=7)
    parser.add_argument("--summary-json", default="", help="write the summary here as JSON")
    # No database here: what run_all.py passes every benchmark is accepted and unused.
    parser.add_argument("--sqlite", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--postgres", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    summary = Summary(title=f"numbers of a compare ({args.cases:,} cases per run)")
    load = os.getloadavg()[0]
    summary.notes.append(f"{os.cpu_count()} cores, load average {load:.2f} at start")
    compare_figures(summary, args)
    draw_figures(summary, args)
    finish(summary, args)


if __name__ == "__main__":
    main()
