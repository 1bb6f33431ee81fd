"""Reply shapes of a harness's history (its chart): the pass rate of each of its runs over
time, one series per dataset."""

from __future__ import annotations

from django.urls import reverse
from pydantic import Field

from core.replies import Reply, Timestamp
from scorecards.models import Run
from scorecards.numbers import wilson_interval
from scorecards.selectors.summary import run_intervals


def _label(run: Run) -> str:
    sha = (run.metadata or {}).get("git_sha")
    return str(sha)[:7] if isinstance(sha, str) and sha else f"#{run.pk}"


class HistoryPoint(Reply):
    run: int
    url: str
    at: Timestamp
    pass_fraction: float | None
    ci: tuple[float, float] | None = Field(
        description="The 95 % interval of pass_fraction: Wilson for a run of one repeat, the "
        "run summary's bootstrap over cases otherwise."
    )
    settled: int
    status: str
    harness_version: int
    label: str = Field(description="metadata.git_sha (short) when set, else #<run id>.")
    self_hosted: bool

    @classmethod
    def of(cls, run: Run) -> HistoryPoint:
        """A run of `harness_runs` as a point of its series."""
        done, passed = getattr(run, "n_done", 0), getattr(run, "n_pass", 0)
        value, ci = round(passed / done, 4) if done else None, None
        if done and run.repeats == 1:
            ci = wilson_interval(passes=passed, trials=done)
        elif done:
            estimate = run_intervals(run)["pass_rate_ci"]
            value, ci = estimate.value, estimate.ci
        return cls(
            run=run.pk,
            url=reverse("run", args=[run.pk]),
            at=run.created_at,
            pass_fraction=value,
            ci=ci,
            settled=done,
            status=run.status,
            harness_version=run.harness.version,
            label=_label(run),
            self_hosted=run.runtime.startswith("self:"),
        )


class HistorySeries(Reply):
    dataset: str
    points: list[HistoryPoint]


class HarnessHistoryReply(Reply):
    workspace: str
    harness: str
    series: list[HistorySeries]

    @classmethod
    def of(cls, *, workspace: str, harness: str, runs: list[Run]) -> HarnessHistoryReply:
        """The runs of `harness_runs`, grouped by dataset name in time order."""
        series: dict[str, list[HistoryPoint]] = {}
        for run in runs:
            series.setdefault(run.dataset.name, []).append(HistoryPoint.of(run))
        return cls(
            workspace=workspace,
            harness=harness,
            series=[HistorySeries(dataset=d, points=p) for d, p in sorted(series.items())],
        )
