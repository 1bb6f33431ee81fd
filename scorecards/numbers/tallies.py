"""What the numbers are computed from: per case, its settled results and what was left out.

An error is a settled result that did not pass. A result still being judged has no verdict yet
and a skipped case never ran: both are left out of every rate and every pair, and counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

PASS = "pass"
SETTLED = frozenset({PASS, "fail", "error"})
LEFT_OUT = frozenset({"judging", "skipped"})


@dataclass(frozen=True, slots=True)
class CaseTally:
    """One case of a run over its repeats: passes among its settled results, the sum of their
    scores, and the results left out (still judging, skipped)."""

    passes: int
    settled: int
    score_sum: float = 0.0
    judging: int = 0
    skipped: int = 0

    def __post_init__(self) -> None:
        if min(self.passes, self.judging, self.skipped) < 0 or self.passes > self.settled:
            raise ValueError(f"not a case's tally: {self!r}")

    @classmethod
    def of_results(cls, results: Iterable[tuple[str, float]]) -> CaseTally:
        """Tally a case's results, given as (verdict, score) per repeat."""
        passes = settled = judging = skipped = 0
        score_sum = 0.0
        for verdict, score in results:
            if verdict in SETTLED:
                settled += 1
                passes += verdict == PASS
                score_sum += score
            elif verdict in LEFT_OUT:
                judging += verdict == "judging"
                skipped += verdict == "skipped"
            else:
                raise ValueError(f"unknown verdict {verdict!r}")
        return cls(passes, settled, score_sum, judging, skipped)

    @property
    def fraction(self) -> float:
        """Passes over settled results (a case with none settled is never counted)."""
        return self.passes / self.settled

    @property
    def mean_score(self) -> float:
        return self.score_sum / self.settled


class Tallied(Protocol):
    """What the paired numbers read of a case's tally: a `CaseTally`, or a row of a grouped
    statement shaped like one (a compare reads 20,000 of them)."""

    @property
    def passes(self) -> int: ...

    @property
    def settled(self) -> int: ...

    @property
    def score_sum(self) -> float: ...


def counted(tallies: Iterable[CaseTally]) -> tuple[list[CaseTally], dict[str, int]]:
    """The cases with a settled result, and what was left out: cases with none (`unsettled`),
    results still `judging` and `skipped` ones."""
    kept: list[CaseTally] = []
    left_out = {"unsettled": 0, "judging": 0, "skipped": 0}
    for tally in tallies:
        if tally.settled:
            kept.append(tally)
        else:
            left_out["unsettled"] += 1
        left_out["judging"] += tally.judging
        left_out["skipped"] += tally.skipped
    return kept, left_out


def fractions(tallies: Sequence[Tallied]) -> NDArray[np.float64]:
    """Each case's pass fraction, as an array."""
    return np.fromiter((t.passes / t.settled for t in tallies), np.float64, len(tallies))


def mean_scores(tallies: Sequence[Tallied]) -> NDArray[np.float64]:
    """Each case's mean score over its settled results, as an array."""
    return np.fromiter((t.score_sum / t.settled for t in tallies), np.float64, len(tallies))


@dataclass(frozen=True)
class Pairs:
    """The cases two runs both settled, in key order, and how many only one of them did."""

    keys: list[str]
    a: list[Tallied]
    b: list[Tallied]
    only_a: int
    only_b: int


def pair_by_key(*, a: Mapping[str, Tallied], b: Mapping[str, Tallied]) -> Pairs:
    """Pair the cases of runs A and B by key; a case with no settled result in one run is
    counted apart, as is a case only one run holds."""
    settled_a = {key for key, tally in a.items() if tally.settled}
    settled_b = {key for key, tally in b.items() if tally.settled}
    # Key order, so the same two runs give the same arrays however their rows were read.
    keys = sorted(settled_a & settled_b)
    return Pairs(
        keys=keys,
        a=[a[key] for key in keys],
        b=[b[key] for key in keys],
        only_a=len(settled_a - settled_b),
        only_b=len(settled_b - settled_a),
    )
