"""Compare two runs of the same dataset, case by case, on pass fractions over repeats:
regressions and fixes first, flaky cases marked, outputs side by side; and whether B differs
from A beyond noise, on the cases both settled (`scorecards.numbers`).

Each run's cases are tallied by the database (one grouped statement a run: results per
verdict, the settled ones' score sum), so a compare of 10,000 cases with 5 repeats moves
10,000 rows a run into Python, not 50,000; the statistics read those tallies. The cases are
listed a page at a time, regressions first: only the page's results are read one by one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, NamedTuple

from django.db.models import Count, Q, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Substr

from core.errors import Invalid, NotFound
from scorecards.diffs import Line, outputs_diff
from scorecards.models import Case, CaseResult, Run, Verdict
from scorecards.numbers import (
    CaseTest,
    Estimate,
    Significance,
    Tallied,
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
# Cases listed a page (regressions first); the compare page diffs the changed ones among them.
COMPARE_PAGE = 200
DIFFED_CASES = COMPARE_PAGE
DIFFED_CHARS = 4096


class CaseCounts(NamedTuple):
    """One case in one run over its repeats, skipped ones left out (they never ran): its
    results per verdict, the settled ones' score sum, its results whose agent changed a
    protected path, its position in the run's dataset and its id. (A tuple: 10,000 a run.)"""

    passes: int
    fails: int
    errors: int
    judging: int
    score_sum: float
    tampered: int
    position: int
    case_id: int

    @property
    def results(self) -> int:
        return self.passes + self.fails + self.errors + self.judging

    @property
    def fraction(self) -> float:
        return self.passes / self.results

    @property
    def flaky(self) -> bool:
        return 0 < self.passes < self.results

    @property
    def settled(self) -> int:
        """Its settled results (a judging one is left out), as the numbers read them."""
        return self.passes + self.fails + self.errors

    @property
    def verdicts(self) -> tuple[int, int, int, int]:
        return (self.passes, self.fails, self.errors, self.judging)


@dataclass
class Side:
    """One case of the listed page in one run: its verdicts per repeat."""

    verdicts: list[str] = field(default_factory=list)
    runners: set[str] = field(default_factory=set)
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


def fraction_change(a: CaseCounts | None, b: CaseCounts | None) -> str:
    """How one case moved from A to B: its pass fraction fell, rose, or stayed."""
    if a is None or b is None:
        return MISSING
    if b.fraction < a.fraction:
        return REGRESSED
    if b.fraction > a.fraction:
        return FIXED
    return UNCHANGED if a.verdicts == b.verdicts else CHANGED


@dataclass(slots=True)
class CaseChange:
    key: str
    change: str
    counts: tuple[CaseCounts | None, CaseCounts | None]
    # Read for the listed page only.
    a: Side | None = None
    b: Side | None = None
    diff: list[Line] | None = None
    # With repeats, a regressed or fixed case's Fisher test and its Benjamini-Hochberg mark.
    test: CaseTest | None = None

    @property
    def pair(self) -> tuple[Side | None, Side | None]:
        return self.a, self.b

    @property
    def flaky(self) -> bool:
        return any(side is not None and side.flaky for side in self.counts)


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
    """B against A: the numbers, every case's change counted, and one page of cases listed
    (`changes`, regressions first) with their results read."""

    a: Run
    b: Run
    numbers: Numbers
    counts: dict[str, int]
    changes: list[CaseChange]
    # Every regressed case of B (its id), and B's cases with a result that ran: what
    # `confined_regressions` reads.
    regressed: list[int]
    cases_b: int
    page: int
    pages: int

    @property
    def cases(self) -> int:
        return sum(self.counts[kind] for kind in ORDER)

    @property
    def listed_from(self) -> int:
        """The first listed case's place among every case (from 1)."""
        return (self.page - 1) * COMPARE_PAGE + 1

    @property
    def listed_to(self) -> int:
        return self.listed_from + len(self.changes) - 1

    @property
    def next_page(self) -> int | None:
        return self.page + 1 if self.page < self.pages else None


def _run_in(user: User, run_id: int, workspace_slug: str | None) -> Run:
    run = run_get(user=user, run_id=run_id)
    if workspace_slug is not None and run.workspace.slug != workspace_slug:
        raise NotFound(f"Run {run_id} not found in workspace {workspace_slug!r}.")
    return run


def _verdicts(verdict: str) -> Count:
    return Count("pk", filter=Q(verdict=verdict))


_COUNTED = (
    "case_id",
    "passes",
    "fails",
    "errors",
    "judging",
    "score_sum",
    "tampered",
    "graded",
)


def run_case_counts(run: Run) -> tuple[dict[str, CaseCounts], bool]:
    """Each case of the run with a result that ran, by key (one statement grouped by case, and
    the dataset's keys), and whether any of those results scored other than 0 or 1."""
    settled = Q(verdict__in=(Verdict.PASS, Verdict.FAIL, Verdict.ERROR))
    rows = (
        CaseResult.objects.filter(run=run)
        # A skipped result never ran (the run's budget was spent first): in no pair.
        .exclude(verdict=Verdict.SKIPPED)
        .values("case_id")
        .annotate(
            passes=_verdicts(Verdict.PASS),
            fails=_verdicts(Verdict.FAIL),
            errors=_verdicts(Verdict.ERROR),
            judging=_verdicts(Verdict.JUDGING),
            score_sum=Sum("score", filter=settled),
            tampered=Count("pk", filter=Q(tampered__0__isnull=False)),
            graded=Count("pk", filter=~Q(score__in=(0.0, 1.0))),
        )
        .order_by()
        .values_list(*_COUNTED)
    )
    cases = {
        pk: (key, position)
        for pk, key, position in Case.objects.filter(dataset_id=run.dataset_id).values_list(
            "pk", "key", "position"
        )
    }
    counts: dict[str, CaseCounts] = {}
    scored = False
    for case_id, passes, fails, errors, judging, score_sum, tampered, graded in rows:
        key, position = cases[case_id]
        counts[key] = CaseCounts(
            passes, fails, errors, judging, score_sum or 0.0, tampered, position, case_id
        )
        scored = scored or graded > 0
    return counts, scored


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


def _runs(user: User, a: int | None, b: int, workspace_slug: str | None) -> tuple[Run, Run]:
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
    return run_a, run_b


def run_compare(
    *,
    user: User,
    b: int,
    a: int | None = None,
    workspace_slug: str | None = None,
    page: int = 1,
) -> Comparison:
    """Per-case changes from run A to run B, regressions first, `page` of them listed; both
    must run the same dataset. Without A, B's baseline: the previous finished run of the same
    harness and dataset."""
    run_a, run_b = _runs(user, a, b, workspace_slug)
    (counts_a, scored_a), (counts_b, scored_b) = run_case_counts(run_a), run_case_counts(run_b)
    # B's cases in B's order, then any case only A had, in A's.
    keys = sorted(counts_b, key=lambda key: counts_b[key].position)
    keys += sorted(counts_a.keys() - counts_b.keys(), key=lambda key: counts_a[key].position)
    changes = []
    for key in keys:
        pair = counts_a.get(key), counts_b.get(key)
        changes.append(CaseChange(key, fraction_change(*pair), pair))
    changes.sort(key=lambda c: ORDER.index(c.change))
    numbers = compare_numbers(run_a, run_b, counts_a, counts_b, scored=scored_a or scored_b)
    _mark_case_tests(changes)
    pages = max(1, math.ceil(len(changes) / COMPARE_PAGE))
    if not 1 <= page <= pages:
        raise Invalid({"page": [f"Page {page} of {pages}: pages are numbered 1 to {pages}."]})
    listed = changes[(page - 1) * COMPARE_PAGE : page * COMPARE_PAGE]
    _read_sides(run_a, run_b, listed)
    return Comparison(
        a=run_a,
        b=run_b,
        numbers=numbers,
        counts=_counted(changes),
        changes=listed,
        regressed=[c.counts[1].case_id for c in changes if c.change == REGRESSED and c.counts[1]],
        cases_b=len(counts_b),
        page=page,
        pages=pages,
    )


def _counted(changes: list[CaseChange]) -> dict[str, int]:
    counts = dict.fromkeys((*ORDER, "tampered_a", "tampered_b"), 0)
    for change in changes:
        a, b = change.counts
        counts[change.change] += 1
        counts["tampered_a"] += a is not None and a.tampered > 0
        counts["tampered_b"] += b is not None and b.tampered > 0
    return counts


def _read_sides(run_a: Run, run_b: Run, listed: list[CaseChange]) -> None:
    """The listed cases' verdicts per repeat in each run, and the hosts that ran them."""
    keys = [c.key for c in listed]
    for name, run in (("a", run_a), ("b", run_b)):
        sides: dict[str, Side] = {}
        rows = (
            CaseResult.objects.filter(run=run, case__key__in=keys)
            .exclude(verdict=Verdict.SKIPPED)
            .order_by("repeat")
            .values_list(
                "case__key",
                "verdict",
                KT("provenance__ran_on"),
                KT("provenance__runner"),
                KT("provenance__by"),
                KT("tampered__0"),
            )
        )
        for key, verdict, ran_on, runner, by, tampered in rows:
            side = sides.setdefault(key, Side())
            side.verdicts.append(verdict)
            side.tampered += tampered is not None
            if ran_on == "self-hosted":
                side.runners.add(f"{runner or ''} by {by or ''}")
        for change in listed:
            setattr(change, name, sides.get(change.key))


def compare_numbers(
    run_a: Run,
    run_b: Run,
    a: Mapping[str, Tallied],
    b: Mapping[str, Tallied],
    *,
    scored: bool,
) -> Numbers:
    """The paired numbers of B against A (seeded: the same runs give the same numbers)."""
    pairs = pair_by_key(a=a, b=b)
    significance = compare_passes(a=pairs.a, b=pairs.b)
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
    moved = []
    for change in changes:
        ta, tb = change.counts
        if change.change not in (REGRESSED, FIXED) or ta is None or tb is None:
            continue
        if (ta.settled > 1 or tb.settled > 1) and ta.settled and tb.settled:
            moved.append((change, ta, tb))
    if not moved:
        return
    tests = case_tests(a=[ta for _, ta, _ in moved], b=[tb for _, _, tb in moved])
    for (change, _, _), test in zip(moved, tests, strict=True):
        change.test = test


def output_diffs(comparison: Comparison, limit: int = DIFFED_CASES) -> None:
    """Attach to the first `limit` changed cases listed the diff of A's output against B's
    (first repeats, first 4 KiB)."""
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
