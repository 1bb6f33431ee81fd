"""Compare two runs of the same dataset, case by case."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accounts.errors import Invalid, NotFound
from scorecards.models import Case, CaseResult, Run, Verdict
from scorecards.selectors.runs import run_get

REGRESSED = "regressed"
FIXED = "fixed"
UNCHANGED = "unchanged"
CHANGED = "changed"
MISSING = "missing"


def verdict_change(a: str | None, b: str | None) -> str:
    """How one case moved from run A to run B."""
    if a is None or b is None:
        return MISSING
    if a == b:
        return UNCHANGED
    if a == Verdict.PASS:
        return REGRESSED
    if b == Verdict.PASS:
        return FIXED
    return CHANGED  # fail <-> error


@dataclass(frozen=True)
class CaseChange:
    key: str
    a: CaseResult | None
    b: CaseResult | None
    change: str

    @property
    def pair(self) -> tuple[CaseResult | None, CaseResult | None]:
        return self.a, self.b


@dataclass(frozen=True)
class Comparison:
    a: Run
    b: Run
    changes: list[CaseChange]

    @property
    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys((REGRESSED, FIXED, CHANGED, UNCHANGED, MISSING), 0)
        for change in self.changes:
            counts[change.change] += 1
        return counts


def _run_in(user: Any, run_id: int, workspace_slug: str) -> Run:
    run = run_get(user=user, run_id=run_id)
    if run.workspace.slug != workspace_slug:
        raise NotFound(f"Run {run_id} not found in workspace {workspace_slug!r}.")
    return run


def run_compare(*, user: Any, workspace_slug: str, a: int, b: int) -> Comparison:
    """Per-case verdict changes from run A to run B; both must run the same dataset."""
    run_a = _run_in(user, a, workspace_slug)
    run_b = _run_in(user, b, workspace_slug)
    if run_a.dataset.name != run_b.dataset.name:
        raise Invalid(
            {
                "b": [
                    f"Run {b} ran dataset {run_b.dataset.name!r}, run {a} ran "
                    f"{run_a.dataset.name!r}: compare two runs of the same dataset."
                ]
            }
        )
    results = {
        run.pk: {
            r.case.key: r
            for r in CaseResult.objects.filter(run=run).select_related("case", "runner")
        }
        for run in (run_a, run_b)
    }
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
        ra, rb = results[run_a.pk].get(key), results[run_b.pk].get(key)
        change = verdict_change(ra.verdict if ra else None, rb.verdict if rb else None)
        changes.append(CaseChange(key=key, a=ra, b=rb, change=change))
    return Comparison(a=run_a, b=run_b, changes=changes)
