"""Reads of runs: one run (for members of its workspace), its summary and logs, the lists
behind the pages, and the runtimes a member may choose."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet

from accounts.errors import NotFound
from runners import queue
from runners.models import JobLogLine, JobStatus, Runner
from runners.presence import runner_statuses, status_severity
from scorecards.models import Run, Verdict
from scorecards.replies import (
    LogLine,
    RunEventItem,
    RunReply,
    RunResultItem,
    RunSummary,
    VersionRef,
)
from scorecards.selectors.workspaces import membership_for


def run_get(*, user: Any, run_id: int) -> Run:
    """Return a run the user can see (a member of its workspace); others get NotFound."""
    run = (
        Run.objects.visible_to(user)
        .select_related("workspace", "harness", "dataset", "submitted_by", "runner")
        .filter(pk=run_id)
        .first()
    )
    if run is None:
        raise NotFound("Run not found.")
    return run


def run_summary(run: Run) -> dict[str, Any]:
    counts = queue.run_job_counts(run.pk)
    verdicts = {v: 0 for v in Verdict.values}
    scores: list[float] = []
    cost = 0.0
    for verdict, score, usage in run.results.values_list("verdict", "score", "usage"):
        verdicts[verdict] += 1
        scores.append(score)
        if isinstance(usage, dict) and isinstance(usage.get("total_cost_usd"), int | float):
            cost += float(usage["total_cost_usd"])
    done = sum(verdicts.values())
    return {
        "total": sum(counts.values()),
        "pending": counts[JobStatus.PENDING] + counts[JobStatus.QUEUED],
        "running": counts[JobStatus.LEASED],
        "pass": verdicts[Verdict.PASS],
        "fail": verdicts[Verdict.FAIL],
        "error": verdicts[Verdict.ERROR],
        "canceled": counts[JobStatus.CANCELED],
        "pass_rate": round(verdicts[Verdict.PASS] / done, 4) if done else None,
        "mean_score": round(sum(scores) / len(scores), 4) if scores else None,
        "cost_usd": round(cost, 6),
    }


def run_logs(*, user: Any, run_id: int, after: int = 0, limit: int = 1000) -> list[LogLine]:
    """Log lines pushed by runners for a run, in order, after sequence number `after`."""
    run = run_get(user=user, run_id=run_id)
    rows = (
        JobLogLine.objects.filter(run=run, pk__gt=after)
        .order_by("pk")
        .values_list("pk", "at", "job__case_key", "line")[:limit]
    )
    return [LogLine(seq=seq, at=at, case=case, line=line) for seq, at, case, line in rows]


def run_reply(run: Run) -> RunReply:
    """The run as `GET /api/runs/<id>` shows it; `results` holds the settled cases."""
    results = run.results.select_related("case", "runner").order_by("case__position")
    return RunReply(
        id=run.pk,
        workspace=run.workspace.slug,
        harness=VersionRef(name=run.harness.name, version=run.harness.version),
        dataset=VersionRef(name=run.dataset.name, version=run.dataset.version),
        status=run.status,
        runtime=run.runtime,
        concurrency=run.concurrency,
        submitted_by=run.submitted_by.get_username(),
        created_at=run.created_at,
        finished_at=run.finished_at,
        summary=RunSummary.model_validate(run_summary(run)),
        events=[RunEventItem(at=e.at, level=e.level, message=e.message) for e in run.events.all()],
        results=[
            RunResultItem(
                case=r.case.key,
                verdict=r.verdict,
                score=r.score,
                status=r.status,
                output=r.output,
                error=r.error,
                duration_ms=r.duration_ms,
                usage=r.usage,
                provenance=r.provenance,
                runner=r.runner_id,
            )
            for r in results
        ],
    )


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


def comparable_runs(*, run: Run, limit: int = 20) -> list[Run]:
    """Other runs of the same dataset in the run's workspace, newest first."""
    return list(
        Run.objects.filter(workspace_id=run.workspace_id, dataset__name=run.dataset.name)
        .exclude(pk=run.pk)
        .select_related("harness", "dataset")
        .order_by("-created_at", "-id")[:limit]
    )
