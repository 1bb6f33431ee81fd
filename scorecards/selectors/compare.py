"""Compare two runs of the same dataset, case by case, on pass fractions over repeats:
regressions and fixes first, flaky cases marked, outputs side by side; and whether B differs
from A beyond noise, on the cases both settled (`scorecards.numbers`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from django.db.models.fields.json import KT
from django.db.models.functions import Substr

from core.errors import Invalid, NotFound
from scorecards.diffs import Line, outputs_diff
from scorecards.models import Case, CaseResult, Run, Verdict
from scorecards.numbers import (
    CaseTally,
    CaseTest,
    Estimate,
    Significance,
    case_tests,
    compare_passes,
    compare_scores,
    compare_sentence,
    pair_by_key,
)
from scorecards.selectors.runs import run_baseline, run_get
from scorecards.selectors.summary import run_intervals

if TYPE_CHECKING:
    from django.contrib.auth.models import User

_PASS = str(Verdict.PASS.value)
REGRESSED = "regressed"
FIXED = "fixed"
UNCHANGED = "unchanged"
CHANGED = "changed"
MISSING = "missing"
ORDER = (REGRESSED, FIXED, CHANGED, MISSING, UNCHANGED)
# Outputs shown side by side on the compare page, for this many changed cases at most.
DIFFED_CASES = 200
DIFFED_CHARS = 4096


@dataclass
class Side:
    """One case in one run: its verdicts per repeat."""

    verdicts: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    runners: set[str] = field(default_factory=set)
    # Where and with what the first repeat ran (compare names what differs between runs).
    fingerprint: dict[str, Any] = field(default_factory=dict)
    # Its results whose agent changed a protected path (protocol 4's verifier).
    tampered: int = 0

    @cached_property
    def passes(self) -> int:
        """Read once the side is whole (against a plain string: comparing with the enum
        member goes through its own equality, a hundred times slower)."""
        return self.verdicts.count(_PASS)

    @property
    def settled(self) -> int:
        return len(self.verdicts)

    @property
    def fraction(self) -> float:
        return self.passes / self.settled if self.verdicts else 0.0

    @property
    def flaky(self) -> bool:
        return 0 < self.passes < self.settled

    @property
    def verdict(self) -> str:
        """The first repeat's verdict (what a one-repeat run shows)."""
        return self.verdicts[0]

    @cached_property
    def tally(self) -> CaseTally:
        """Its results as the numbers read them (read once the side is whole)."""
        return CaseTally.of_results(zip(self.verdicts, self.scores, strict=True))


def fraction_change(a: Side | None, b: Side | None) -> str:
    """How one case moved from A to B: its pass fraction fell, rose, or stayed."""
    if a is None or b is None:
        return MISSING
    if b.fraction < a.fraction:
        return REGRESSED
    if b.fraction > a.fraction:
        return FIXED
    return UNCHANGED if sorted(a.verdicts) == sorted(b.verdicts) else CHANGED


@dataclass
class CaseChange:
    key: str
    a: Side | None
    b: Side | None
    change: str
    diff: list[Line] | None = None
    # With repeats, a regressed or fixed case's Fisher test and its Benjamini-Hochberg mark.
    test: CaseTest | None = None

    @property
    def pair(self) -> tuple[Side | None, Side | None]:
        return self.a, self.b

    @property
    def flaky(self) -> bool:
        return any(side is not None and side.flaky for side in self.pair)


@dataclass(frozen=True)
class Numbers:
    """Whether B differs from A: each run's pass rate with its interval, the paired test of
    the cases both settled (and of their scores, when the grader gives more than pass or
    fail), the cases only one run settled, and the sentence a compare leads with."""

    a: Estimate
    b: Estimate
    significance: Significance
    scores: Significance | None
    only_a: int
    only_b: int
    sentence: str


@dataclass(frozen=True)
class Comparison:
    a: Run
    b: Run
    changes: list[CaseChange]
    numbers: Numbers

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys((*ORDER, "tampered_a", "tampered_b"), 0)
        for change in self.changes:
            counts[change.change] += 1
            counts["tampered_a"] += change.a is not None and change.a.tampered > 0
            counts["tampered_b"] += change.b is not None and change.b.tampered > 0
        return counts


def _run_in(user: User, run_id: int, workspace_slug: str | None) -> Run:
    run = run_get(user=user, run_id=run_id)
    if workspace_slug is not None and run.workspace.slug != workspace_slug:
        raise NotFound(f"Run {run_id} not found in workspace {workspace_slug!r}.")
    return run


def _sides(run: Run) -> dict[str, Side]:
    """Each case's verdicts and scores per repeat, the hosts that ran it, and its first
    repeat's fingerprint (repeat 0). Where a case ran is read as text by the database, and the
    fingerprint (a JSON document) for one repeat a case: a compare of 10,000 cases with 5
    repeats decodes 10,000 documents, not 100,000."""
    sides: dict[str, Side] = {}
    # A skipped result never ran (the run's budget was spent first): in no pair.
    rows = (
        CaseResult.objects.filter(run=run)
        .exclude(verdict=Verdict.SKIPPED)
        .order_by("repeat")
        .values_list(
            "case__key",
            "verdict",
            "score",
            KT("provenance__ran_on"),
            KT("provenance__runner"),
            KT("provenance__by"),
            KT("tampered__0"),
        )
    )
    for key, verdict, score, ran_on, runner, by, tampered in rows:
        side = sides.setdefault(key, Side())
        side.verdicts.append(verdict)
        side.scores.append(score)
        side.tampered += tampered is not None
        if ran_on == "self-hosted":
            side.runners.add(f"{runner or ''} by {by or ''}")
    first = CaseResult.objects.filter(run=run, repeat=0)
    for key, fingerprint in first.values_list("case__key", "fingerprint"):
        if key in sides:
            sides[key].fingerprint = fingerprint or {}
    return sides


def _baseline(user: User, run_b: Run) -> Run:
    baseline = run_baseline(run_b)
    if baseline is None:
        raise Invalid(
            {
                "a": [
                    f"No earlier finished run of {run_b.harness.name} over {run_b.dataset.name}"
                    f" to compare run {run_b.pk} with."
                ]
            }
        )
    return run_get(user=user, run_id=baseline.pk)


def run_compare(
    *, user: User, b: int, a: int | None = None, workspace_slug: str | None = None
) -> Comparison:
    """Per-case changes from run A to run B, regressions first; both must run the same dataset.
    Without A, B's baseline: the previous finished run of the same harness and dataset."""
    run_b = _run_in(user, b, workspace_slug)
    run_a = _baseline(user, run_b) if a is None else _run_in(user, a, workspace_slug)
    if run_a.workspace_id != run_b.workspace_id or run_a.dataset.name != run_b.dataset.name:
        raise Invalid(
            {
                "b": [
                    f"Run {run_b.pk} ran dataset {run_b.dataset.name!r}, run {run_a.pk} ran "
                    f"{run_a.dataset.name!r}: compare two runs of the same dataset."
                ]
            }
        )
    sides = {run.pk: _sides(run) for run in (run_a, run_b)}
    # B's cases in B's order, then any case only A had.
    keys = dict.fromkeys(
        key
        for dataset_id in (run_b.dataset_id, run_a.dataset_id)
        for key in Case.objects.filter(dataset_id=dataset_id)
        .order_by("position")
        .values_list("key", flat=True)
    )
    changes = []
    for key in keys:
        side_a, side_b = sides[run_a.pk].get(key), sides[run_b.pk].get(key)
        if side_a is None and side_b is None:
            continue
        changes.append(CaseChange(key, side_a, side_b, fraction_change(side_a, side_b)))
    changes.sort(key=lambda c: ORDER.index(c.change))
    numbers = compare_numbers(run_a, run_b, sides[run_a.pk], sides[run_b.pk])
    _mark_case_tests(changes)
    return Comparison(a=run_a, b=run_b, changes=changes, numbers=numbers)


def compare_numbers(run_a: Run, run_b: Run, a: dict[str, Side], b: dict[str, Side]) -> Numbers:
    """The paired numbers of B against A (seeded: the same runs give the same numbers)."""
    pairs = pair_by_key(
        a={key: side.tally for key, side in a.items()},
        b={key: side.tally for key, side in b.items()},
    )
    significance = compare_passes(a=pairs.a, b=pairs.b)
    graded = (score for side in (*a.values(), *b.values()) for score in side.scores)
    scored = any(score not in (0.0, 1.0) for score in graded)
    estimate_a = run_intervals(run_a)["pass_rate_ci"]
    estimate_b = run_intervals(run_b)["pass_rate_ci"]
    return Numbers(
        a=estimate_a,
        b=estimate_b,
        significance=significance,
        scores=compare_scores(a=pairs.a, b=pairs.b) if scored and pairs.keys else None,
        only_a=pairs.only_a,
        only_b=pairs.only_b,
        sentence=compare_sentence(a=estimate_a, b=estimate_b, significance=significance),
    )


def _mark_case_tests(changes: list[CaseChange]) -> None:
    """With repeats, Fisher's exact test of each regressed or fixed case, marked where it
    survives the Benjamini-Hochberg correction over them."""
    moved = [
        c
        for c in changes
        if c.change in (REGRESSED, FIXED)
        and c.a is not None
        and c.b is not None
        and (c.a.tally.settled > 1 or c.b.tally.settled > 1)
        and c.a.tally.settled
        and c.b.tally.settled
    ]
    if not moved:
        return
    tests = case_tests(
        a=[c.a.tally for c in moved if c.a is not None],
        b=[c.b.tally for c in moved if c.b is not None],
    )
    for change, test in zip(moved, tests, strict=True):
        change.test = test


def output_diffs(comparison: Comparison, limit: int = DIFFED_CASES) -> None:
    """Attach to the first `limit` changed cases the diff of A's output against B's (first
    repeats, first 4 KiB)."""
    shown = [c for c in comparison.changes if c.change in (REGRESSED, FIXED, CHANGED)][:limit]
    keys = [c.key for c in shown]
    outputs: dict[tuple[int, str], str] = {}
    for run in (comparison.a, comparison.b):
        rows = (
            CaseResult.objects.filter(run=run, case__key__in=keys, repeat=0)
            .annotate(head=Substr("output", 1, DIFFED_CHARS))
            .values_list("case__key", "head")
        )
        outputs.update({(run.pk, key): head for key, head in rows})
    for change in shown:
        before = outputs.get((comparison.a.pk, change.key), "")
        after = outputs.get((comparison.b.pk, change.key), "")
        change.diff = outputs_diff(before, after)
