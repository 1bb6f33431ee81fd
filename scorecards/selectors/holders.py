"""What the runners holding a run's cases say right now ("waiting for consent on acme/x@3",
"running 2 jobs"): the live status line each runner sends with its lease and heartbeats."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count

from runners.models import JobStatus, RunnerJob
from runners.presence import runner_statuses, status_severity
from scorecards.models import Run


@dataclass(frozen=True)
class HolderStatus:
    runner: str
    cases: int
    status: str

    @property
    def severity(self) -> str:
        return status_severity(self.status) if self.status else ""


def run_holders(run: Run) -> list[HolderStatus]:
    """The runners that hold a lease on one of the run's cases, with what they report."""
    if run.is_terminal:
        return []
    held = (
        RunnerJob.objects.filter(run_id=run.pk, status=JobStatus.LEASED, leased_by__isnull=False)
        .values("leased_by_id", "leased_by__label")
        .annotate(cases=Count("id"))
        .order_by("leased_by__label", "leased_by_id")
    )
    rows = list(held)
    statuses = runner_statuses([row["leased_by_id"] for row in rows])
    return [
        HolderStatus(
            runner=f"{row['leased_by__label']} (#{row['leased_by_id']})",
            cases=row["cases"],
            status=statuses.get(row["leased_by_id"], ""),
        )
        for row in rows
    ]
