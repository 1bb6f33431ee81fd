"""Why a run waits: the runners that could take its queued cases are paused by a plan limit."""

from __future__ import annotations

from django.utils import timezone

from runners.models import JobStatus, Runner
from scorecards.models import Run


def run_waiting(run: Run) -> str:
    """ "waiting: runner laptop paused: rate-limited until 15:04" while every runner that could
    take the run's queued cases is paused; empty otherwise."""
    if run.is_terminal or not run.jobs.filter(status=JobStatus.QUEUED).exists():
        return ""
    now = timezone.now()
    runners = Runner.objects.owned_by(run.submitted_by_id).active()
    candidates = list(runners.filter(pk=run.runner_id) if run.runner_id else runners)
    needed = set(run.harness.capabilities)
    capable = [r for r in candidates if needed <= set(r.capabilities or [])]
    paused = [r for r in capable if r.paused_until is not None and r.paused_until > now]
    if not capable or len(paused) != len(capable):
        return ""
    return "waiting: " + "; ".join(
        f"runner {r.label} paused: {r.pause_reason or 'plan limit'} until "
        f"{timezone.localtime(r.paused_until).strftime('%H:%M')}"
        for r in paused
    )
