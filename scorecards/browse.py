"""Reads behind the workspace pages: runs lists, version histories, runtime choices, compare.

Nothing here writes. Every read starts from the caller's membership, so someone outside a
workspace gets NotFound for everything in it, as on the API.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Count, Q, QuerySet

from everdict.errors import Invalid, NotFound
from runners.models import Runner
from runners.presence import runner_statuses, status_severity
from scorecards.models import (
    Case,
    CaseResult,
    DatasetVersion,
    HarnessVersion,
    Run,
    Verdict,
)
from scorecards.services import run_get
from scorecards.workspaces import membership_for

RUNTIME_ANY = "self:any"


def runtime_label(run: Run) -> str:
    """How a run's runtime reads on a page: which of the submitter's machines it targets."""
    if run.runner is not None:
        return f"{run.runner.label} (#{run.runner.pk}) of {run.submitted_by.get_username()}"
    if run.runtime == RUNTIME_ANY:
        return f"any of {run.submitted_by.get_username()}'s runners"
    return run.runtime


def run_list(*, user: Any, workspace_slug: str, limit: int = 50) -> list[Run]:
    """The workspace's latest runs, annotated with `n_done` and `n_pass` settled cases."""
    workspace = membership_for(user=user, slug=workspace_slug).workspace
    runs: QuerySet[Run] = (
        Run.objects.filter(workspace=workspace)
        .select_related("harness", "dataset", "submitted_by", "runner")
        .annotate(
            n_done=Count("results"),
            n_pass=Count("results", filter=Q(results__verdict=Verdict.PASS)),
        )
        .order_by("-created_at", "-id")
    )
    return list(runs[:limit])


@dataclass
class VersionHistory:
    """Every version of one harness or dataset name, newest first."""

    name: str
    versions: list[Any] = field(default_factory=list)

    @property
    def latest(self) -> Any:
        return self.versions[0]


def _histories(versions: Iterable[Any]) -> list[VersionHistory]:
    grouped: dict[str, VersionHistory] = {}
    for version in versions:
        grouped.setdefault(version.name, VersionHistory(version.name)).versions.append(version)
    return list(grouped.values())


def harness_histories(*, user: Any, workspace_slug: str) -> list[VersionHistory]:
    workspace = membership_for(user=user, slug=workspace_slug).workspace
    versions = (
        HarnessVersion.objects.filter(workspace=workspace)
        .select_related("created_by")
        .order_by("name", "-version")
    )
    return _histories(versions)


def dataset_histories(*, user: Any, workspace_slug: str) -> list[VersionHistory]:
    workspace = membership_for(user=user, slug=workspace_slug).workspace
    versions = (
        DatasetVersion.objects.filter(workspace=workspace)
        .select_related("created_by")
        .order_by("name", "-version")
    )
    return _histories(versions)


@dataclass(frozen=True)
class RuntimeChoice:
    """One entry of the run form's runtime selector."""

    value: str
    label: str
    capabilities: list[str]
    online: bool
    status: str
    missing: list[str]

    @property
    def severity(self) -> str:
        return status_severity(self.status) if self.status else ""

    @property
    def disabled(self) -> bool:
        return bool(self.missing)


def runtime_choices(*, user: Any, capabilities: list[str]) -> list[RuntimeChoice]:
    """My active runners as runtimes, then "any of my runners"; those lacking `capabilities`
    carry what they miss (the form greys them out; dispatch would refuse them anyway)."""
    runners = list(Runner.objects.owned_by(user).active())
    statuses = runner_statuses([r.pk for r in runners])
    needed = set(capabilities)
    choices = [
        RuntimeChoice(
            value=f"self:{r.pk}",
            label=f"My local host — {r.label}",
            capabilities=sorted(r.capabilities or []),
            online=r.is_online,
            status=statuses.get(r.pk, ""),
            missing=sorted(needed - set(r.capabilities or [])),
        )
        for r in runners
    ]
    capable = [c for c in choices if not c.missing]
    choices.append(
        RuntimeChoice(
            value=RUNTIME_ANY,
            label="Any of my runners",
            capabilities=[],
            online=any(c.online for c in capable),
            status="",
            missing=[] if capable else sorted(needed) or ["a paired runner"],
        )
    )
    return choices


# ------------------------------------------------------------------ compare

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


def comparable_runs(*, run: Run, limit: int = 20) -> list[Run]:
    """Other runs of the same dataset in the run's workspace, newest first."""
    return list(
        Run.objects.filter(workspace_id=run.workspace_id, dataset__name=run.dataset.name)
        .exclude(pk=run.pk)
        .select_related("harness", "dataset")
        .order_by("-created_at", "-id")[:limit]
    )
