"""Compare two runs of the same dataset, case by case, on pass fractions over repeats:
regressions and fixes first, flaky cases marked, outputs side by side."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db.models.functions import Substr

from core.errors import Invalid, NotFound
from scorecards.diffs import Line, outputs_diff
from scorecards.models import Case, CaseResult, Run, Verdict
from scorecards.selectors.runs import run_baseline, run_get

if TYPE_CHECKING:
    from django.contrib.auth.models import User

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
    runners: set[str] = field(default_factory=set)
    # Where and with what the first repeat ran (compare names what differs between runs).
    fingerprint: dict[str, Any] = field(default_factory=dict)

    @property
    def passes(self) -> int:
        return self.verdicts.count(Verdict.PASS)

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

    @property
    def pair(self) -> tuple[Side | None, Side | None]:
        return self.a, self.b

    @property
    def flaky(self) -> bool:
        return any(side is not None and side.flaky for side in self.pair)


@dataclass(frozen=True)
class Comparison:
    a: Run
    b: Run
    changes: list[CaseChange]

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(ORDER, 0)
        for change in self.changes:
            counts[change.change] += 1
        return counts


def _run_in(user: User, run_id: int, workspace_slug: str | None) -> Run:
    run = run_get(user=user, run_id=run_id)
    if workspace_slug is not None and run.workspace.slug != workspace_slug:
        raise NotFound(f"Run {run_id} not found in workspace {workspace_slug!r}.")
    return run


def _sides(run: Run) -> dict[str, Side]:
    sides: dict[str, Side] = {}
    rows = (
        CaseResult.objects.filter(run=run)
        .order_by("repeat")
        .values_list("case__key", "verdict", "provenance", "fingerprint")
    )
    for key, verdict, provenance, fingerprint in rows:
        side = sides.setdefault(key, Side())
        if not side.verdicts:
            side.fingerprint = fingerprint or {}
        side.verdicts.append(verdict)
        if (provenance or {}).get("ran_on") == "self-hosted":
            side.runners.add(f"{provenance.get('runner', '')} by {provenance.get('by', '')}")
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
    return Comparison(a=run_a, b=run_b, changes=changes)


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
