"""Rerun failures / run unfinished: a new run over some cases of a finished one, with the same
harness and dataset versions, the same repeats and concurrency, and `parent` set to it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import Count, Q

from core.errors import Invalid
from scorecards.models import Case, CaseResult, Run, Verdict
from scorecards.selectors.runs import run_get
from scorecards.services.runs import run_start

if TYPE_CHECKING:
    from django.contrib.auth.models import User

FAILED = "failed"
UNFINISHED = "unfinished"
RERUN_CHOICES = (FAILED, UNFINISHED)


def rerun_cases(run: Run, only: str) -> list[str]:
    """The keys of the run's cases to run again, in dataset order.

    `failed`: cases with a fail or error on any repeat. `unfinished`: cases with a repeat
    that has no pass/fail verdict (never settled, or settled as an error: canceled, no
    runner, out of attempts)."""
    if only not in RERUN_CHOICES:
        raise Invalid({"only": [f"Unknown choice {only!r}: use failed or unfinished."]})
    results = CaseResult.objects.filter(run=run)
    if only == FAILED:
        picked = results.filter(verdict__in=(Verdict.FAIL, Verdict.ERROR)).values("case_id")
        return list(
            Case.objects.filter(pk__in=picked).order_by("position").values_list("key", flat=True)
        )
    judged = (
        results.filter(verdict__in=(Verdict.PASS, Verdict.FAIL))
        .values("case_id")
        .annotate(n=Count("pk"))
        .filter(n__gte=run.repeats)
        .values("case_id")
    )
    cases = Case.objects.filter(dataset_id=run.dataset_id).exclude(pk__in=judged)
    if run.parent_id is not None:
        # A rerun covers only its own cases: those it was started with.
        cases = cases.filter(Q(key__in=run.jobs.values("case_key")))
    return list(cases.order_by("position").values_list("key", flat=True))


def run_rerun(*, user: User, run_id: int, only: str, runtime: str | None = None) -> Run:
    """Start a new run over the failed (or unfinished) cases of a run the user can see.

    The runtime is the original's when the caller submitted it, else any of the caller's
    runners (`self:any`): a run goes to its own submitter's machines only. The rerun has its
    parent's budget (`max_cost_usd`), its own to spend."""
    run = run_get(user=user, run_id=run_id)
    keys = rerun_cases(run, only)
    if not keys:
        what = "failed" if only == FAILED else "unfinished"
        raise Invalid({"only": [f"Run {run.pk} has no {what} case to run again."]})
    if runtime is None:
        runtime = run.runtime if run.submitted_by_id == user.pk else "self:any"
    return run_start(
        user=user,
        workspace_slug=run.workspace.slug,
        harness=run.harness.name,
        harness_version=run.harness.version,
        dataset=run.dataset.name,
        dataset_version=run.dataset.version,
        runtime=runtime,
        concurrency=run.concurrency,
        repeats=run.repeats,
        metadata=run.metadata,
        case_keys=keys,
        parent=run,
        rerun_of=only,
        # The rerun spends under the same budget its parent was given.
        max_cost_usd=run.max_cost_usd,
    )
