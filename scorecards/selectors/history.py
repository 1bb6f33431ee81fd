"""A harness's history: each of its runs over time, with how many results settled and passed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import Count, Q

from core.errors import NotFound
from scorecards.models import HarnessVersion, Run, Verdict
from scorecards.selectors.workspaces import membership_for

if TYPE_CHECKING:
    from django.contrib.auth.models import User

HISTORY_RUNS = 500


def harness_runs(
    *, user: User, workspace_slug: str, name: str, limit: int = HISTORY_RUNS
) -> list[Run]:
    """Every run of the harness (any version) in the workspace, the newest `limit` in time
    order, annotated with `n_done` settled results (pass, fail, error) and `n_pass`; reruns
    of a subset of cases are left out."""
    workspace = membership_for(user=user, slug=workspace_slug).workspace
    if not HarnessVersion.objects.filter(workspace=workspace, name=name).exists():
        raise NotFound(f"Harness {name!r} not found in workspace {workspace.slug!r}.")
    runs = list(
        Run.objects.filter(workspace=workspace, harness__name=name, parent__isnull=True)
        .select_related("harness", "dataset")
        .annotate(
            n_done=Count(
                "results",
                filter=Q(results__verdict__in=(Verdict.PASS, Verdict.FAIL, Verdict.ERROR)),
            ),
            n_pass=Count("results", filter=Q(results__verdict=Verdict.PASS)),
        )
        .order_by("-id")[:limit]
    )
    return runs[::-1]
