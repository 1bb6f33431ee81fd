"""A run's summary, computed by the database: counts per verdict, the mean pass fraction over
cases with its standard error, flaky cases and reported cost; and the 95 % intervals of the
pass rate and the mean score.

Every count is an aggregate over the run's results (one statement each), so a summary of a
10,000-case run moves a few numbers, not 10,000 rows, into Python. The intervals need each
case's tally: they are computed once per run and settlement (a stamp of what the counts read)
and cached, since the summary is recomputed on every live update.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from typing import Any

from django.core.cache import cache
from django.db.models import Avg, Case, Count, F, FloatField, Max, Q, Sum, Value, When
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from runners import queue
from runners.models import JobStatus
from scorecards import lifecycle
from scorecards.models import CaseResult, Run, Verdict
from scorecards.numbers import CaseTally, Estimate, mean_score_estimate, pass_rate_estimate

_PASS_SHARE = Avg(
    Case(When(verdict=Verdict.PASS, then=Value(1.0)), default=Value(0.0)),
    output_field=FloatField(),
)


def case_fractions(run: Run) -> Any:
    """Per case of the run: `case_id`, `passes`, `settled` and `fraction` (passes / settled);
    a case still being judged has no verdict yet, and a skipped one never ran: neither is
    counted."""
    return (
        CaseResult.objects.filter(run=run)
        .exclude(verdict__in=(Verdict.JUDGING, Verdict.SKIPPED))
        .values("case_id")
        .annotate(
            passes=Count("pk", filter=Q(verdict=Verdict.PASS)),
            settled=Count("pk"),
            fraction=_PASS_SHARE,
        )
        .order_by()
    )


def case_tallies(run: Run, keys: Iterable[str]) -> dict[str, tuple[int, int]]:
    """Passes and settled results of these cases of the run, by key."""
    rows = (
        CaseResult.objects.filter(run=run, case__key__in=list(keys))
        .values("case__key")
        .annotate(passes=Count("pk", filter=Q(verdict=Verdict.PASS)), settled=Count("pk"))
        .order_by()
    )
    return {row["case__key"]: (row["passes"], row["settled"]) for row in rows}


def pass_fraction_stats(run: Run) -> dict[str, Any]:
    """The mean pass fraction over cases, its standard error, and how many cases are flaky."""
    stats = case_fractions(run).aggregate(
        cases=Count("case_id"),
        total=Sum("fraction"),
        squares=Sum(F("fraction") * F("fraction")),
        flaky=Count("case_id", filter=Q(fraction__gt=0.0, fraction__lt=1.0)),
    )
    return mean_and_stderr(stats["cases"] or 0, stats["total"] or 0.0, stats["squares"] or 0.0) | {
        "cases": stats["cases"] or 0,
        "flaky": stats["flaky"] or 0,
    }


def mean_and_stderr(n: int, total: float, squares: float) -> dict[str, float | None]:
    """The mean of n values from their sum and sum of squares, and its standard error (the
    sample standard deviation over √n; none below two values)."""
    if n == 0:
        return {"pass_fraction": None, "stderr": None}
    mean = total / n
    if n < 2:
        return {"pass_fraction": round(mean, 4), "stderr": None}
    variance = max(0.0, (squares - total * total / n) / (n - 1))
    return {"pass_fraction": round(mean, 4), "stderr": round(math.sqrt(variance / n), 4)}


def run_tallies(run: Run) -> list[CaseTally]:
    """Each case of the run that has a result: its passes among settled results, their score
    sum, and its results still judging or skipped (one statement, grouped by case id: no join,
    no sort)."""
    settled = Q(verdict__in=(Verdict.PASS, Verdict.FAIL, Verdict.ERROR))
    rows = (
        CaseResult.objects.filter(run=run)
        .values("case_id")
        .annotate(
            passes=Count("pk", filter=Q(verdict=Verdict.PASS)),
            settled=Count("pk", filter=settled),
            score_sum=Sum("score", filter=settled),
            judging=Count("pk", filter=Q(verdict=Verdict.JUDGING)),
            skipped=Count("pk", filter=Q(verdict=Verdict.SKIPPED)),
        )
        .order_by()
        .values_list("passes", "settled", "score_sum", "judging", "skipped")
    )
    return [
        CaseTally(passes, settled, score_sum or 0.0, judging, skipped)
        for passes, settled, score_sum, judging, skipped in rows
    ]


_INTERVALS_TTL_S = 24 * 3600


def run_intervals(run: Run, stamp: tuple[Any, ...] | None = None) -> dict[str, Estimate]:
    """The run's pass rate and mean score, each with its 95 % interval (`pass_rate_ci`,
    `mean_score_ci`), cached under the run and its stamp: what changes when a result settles
    or a verdict changes (read here unless `run_summary` gives it from its counts)."""
    if stamp is None:
        stamp = _stamp(run, _totals(run))
    digest = hashlib.sha256(repr(stamp).encode()).hexdigest()[:32]
    key = f"numbers:run:{run.pk}:{digest}"
    cached = cache.get(key)
    if cached is not None and cached.get("stamp") == repr(stamp):
        return {name: Estimate.model_validate(cached[name]) for name in _INTERVALS}
    tallies = run_tallies(run)
    figures = {
        "pass_rate_ci": pass_rate_estimate(tallies),
        "mean_score_ci": mean_score_estimate(tallies),
    }
    stored = {name: figure.model_dump(mode="json") for name, figure in figures.items()}
    cache.set(key, stored | {"stamp": repr(stamp)}, _INTERVALS_TTL_S)
    return figures


_INTERVALS = ("pass_rate_ci", "mean_score_ci")


def _intervals_before() -> dict[str, dict[str, Any]]:
    return {name: run_intervals_empty() for name in _INTERVALS}


def run_intervals_empty() -> dict[str, Any]:
    """An interval of a run with nothing settled."""
    return pass_rate_estimate([]).model_dump(mode="json")


# Each result's phase times, whose means a run's summary gives.
PHASES = ("setup_s", "agent_s", "verify_s", "collect_s")


def _totals(run: Run) -> dict[str, Any]:
    return CaseResult.objects.filter(run=run).aggregate(
        passed=Count("pk", filter=Q(verdict=Verdict.PASS)),
        failed=Count("pk", filter=Q(verdict=Verdict.FAIL)),
        errored=Count("pk", filter=Q(verdict=Verdict.ERROR)),
        judging=Count("pk", filter=Q(verdict=Verdict.JUDGING)),
        skipped=Count("pk", filter=Q(verdict=Verdict.SKIPPED)),
        mean=Avg("score", filter=~Q(verdict__in=(Verdict.JUDGING, Verdict.SKIPPED))),
        score_sum=Sum("score"),
        # Usage is written by the server (numbers only), so the cast cannot fail.
        cost=Sum(Cast(KT("usage__total_cost_usd"), FloatField())),
        last_seq=Max("seq"),
        last_verdict_at=Max("verdict_at"),
        # Protocol 4: results whose agent changed a protected path (a first one is named).
        tampered=Count("pk", filter=Q(tampered__0__isnull=False)),
        **{phase: Avg(Cast(KT(f"phases__{phase}"), FloatField())) for phase in PHASES},
    )


def _stamp(run: Run, totals: dict[str, Any]) -> tuple[Any, ...]:
    """What the intervals read changes only with one of these: a result settling (seq, counts),
    a judge's verdict arriving (counts), a person's verdict (verdict_at) or a regrade."""
    return (
        totals["last_seq"],
        totals["passed"],
        totals["failed"],
        totals["errored"],
        totals["judging"],
        totals["skipped"],
        totals["score_sum"],
        str(totals["last_verdict_at"]),
        str(run.regraded_at),
    )


def budget_figures(run: Run, skipped: int) -> dict[str, Any]:
    """The run's budget, and whether reaching it ended the run (cases skipped for it)."""
    limit = None if run.max_cost_usd is None else float(run.max_cost_usd)
    return {"max_cost_usd": limit, "budget_ended": limit is not None and skipped > 0}


def run_summary(run: Run) -> dict[str, Any]:
    counts = queue.run_job_counts(run.pk)
    totals = _totals(run)
    intervals = run_intervals(run, _stamp(run, totals))
    done = totals["passed"] + totals["failed"] + totals["errored"]
    return {
        "total": sum(counts.values()),
        "pending": counts[JobStatus.PENDING] + counts[JobStatus.QUEUED],
        "running": counts[JobStatus.LEASED],
        "pass": totals["passed"],
        "fail": totals["failed"],
        "error": totals["errored"],
        "judging": totals["judging"],
        "canceled": counts[JobStatus.CANCELED],
        "pass_rate": round(totals["passed"] / done, 4) if done else None,
        "mean_score": round(totals["mean"], 4) if totals["mean"] is not None else None,
        **pass_fraction_stats(run),
        "skipped": totals["skipped"],
        **budget_figures(run, totals["skipped"]),
        **{name: figure.model_dump(mode="json") for name, figure in intervals.items()},
        "cost_usd": round(totals["cost"] or 0.0, 6),
        "tampered": totals["tampered"],
        "phases": {phase: round(totals[phase], 3) for phase in PHASES if totals[phase] is not None}
        or None,
        **lifecycle.summary_figures(run),
    }


def waiting_summary(jobs: int) -> dict[str, Any]:
    """The summary of a run whose `jobs` all wait: nothing settled yet (`run_summary`'s keys)."""
    return {
        "total": jobs,
        "pending": jobs,
        "running": 0,
        "pass": 0,
        "fail": 0,
        "error": 0,
        "judging": 0,
        "canceled": 0,
        "pass_rate": None,
        "mean_score": None,
        **mean_and_stderr(0, 0.0, 0.0),
        "cases": 0,
        "flaky": 0,
        "skipped": 0,
        "max_cost_usd": None,
        "budget_ended": False,
        **_intervals_before(),
        "cost_usd": 0.0,
        "tampered": 0,
        "phases": None,
        **lifecycle.summary_before(),
    }


SCORE_BINS = 10


def score_distribution(run: Run) -> list[int]:
    """How many cases fall in each tenth of pass fraction: [0, 0.1), …, [0.9, 1.0]."""
    bins = [0] * SCORE_BINS
    for fraction in case_fractions(run).values_list("fraction", flat=True):
        bins[min(SCORE_BINS - 1, int(fraction * SCORE_BINS))] += 1
    return bins
