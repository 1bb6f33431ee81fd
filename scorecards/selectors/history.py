"""A harness's history: the pass rate of each of its runs over time, one series per dataset."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Q
from django.urls import reverse

from core.errors import NotFound
from scorecards.compare_replies import HarnessHistoryReply, HistoryPoint, HistorySeries
from scorecards.models import HarnessVersion, Run, Verdict
from scorecards.selectors.workspaces import membership_for

HISTORY_RUNS = 500


def _label(run: Run) -> str:
    sha = (run.metadata or {}).get("git_sha")
    return str(sha)[:7] if isinstance(sha, str) and sha else f"#{run.pk}"


def harness_history(
    *, user: Any, workspace_slug: str, name: str, limit: int = HISTORY_RUNS
) -> HarnessHistoryReply:
    """Every run of the harness (any version) in the workspace, newest `limit`, grouped by
    dataset name and in time order; reruns of a subset of cases are left out."""
    workspace = membership_for(user=user, slug=workspace_slug).workspace
    if not HarnessVersion.objects.filter(workspace=workspace, name=name).exists():
        raise NotFound(f"Harness {name!r} not found in workspace {workspace.slug!r}.")
    runs = list(
        Run.objects.filter(workspace=workspace, harness__name=name, parent__isnull=True)
        .select_related("harness", "dataset")
        .annotate(
            n_done=Count("results"),
            n_pass=Count("results", filter=Q(results__verdict=Verdict.PASS)),
        )
        .order_by("-id")[:limit]
    )
    series: dict[str, list[HistoryPoint]] = {}
    for run in reversed(runs):
        done, passed = getattr(run, "n_done", 0), getattr(run, "n_pass", 0)
        series.setdefault(run.dataset.name, []).append(
            HistoryPoint(
                run=run.pk,
                url=reverse("run", args=[run.pk]),
                at=run.created_at,
                pass_fraction=round(passed / done, 4) if done else None,
                settled=done,
                status=run.status,
                harness_version=run.harness.version,
                label=_label(run),
                self_hosted=run.runtime.startswith("self:"),
            )
        )
    return HarnessHistoryReply(
        workspace=workspace.slug,
        harness=name,
        series=[HistorySeries(dataset=d, points=p) for d, p in sorted(series.items())],
    )
