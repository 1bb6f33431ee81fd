"""A run's budget: once the cost its cases and judges reported reaches the run's
`max_cost_usd`, the cases no runner has started end `skipped`; running ones finish.

Called by the transaction that records a cost (a case's result or a judge's vote), under the
run's row lock, before the run admits its next jobs.
"""

from __future__ import annotations

from decimal import Decimal

from django.db.models import FloatField, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from runners import queue
from scorecards import lifecycle
from scorecards.models import Case, EventLevel, Run
from scorecards.models import CaseResult as CaseResultRow
from scorecards.scoring import Grade
from scorecards.selectors.results import last_result_seq
from scorecards.services.events import event
from scorecards.services.grades import settled_fields

# The job's reason when the budget ends it before it started.
BUDGET_REASON = "run budget reached"


def budget_text(limit: Decimal | float) -> str:
    return f"run budget ${float(limit):.2f} reached"


def run_cost(run: Run) -> float:
    """What the run's cases and its judges reported they cost (USD, provenance)."""
    cases = CaseResultRow.objects.filter(run=run).aggregate(
        cost=Sum(Cast(KT("usage__total_cost_usd"), FloatField()))
    )["cost"]
    judges = lifecycle.summary_figures(run).get("judge_cost_usd", 0.0)
    return float(cases or 0.0) + float(judges or 0.0)


def run_budget_spend(run: Run) -> int:
    """The run's row is locked and a cost was just recorded: when the run's reported cost
    reached its budget, cancel its cases not started and write a `skipped` result for each.
    The number skipped (0 when the budget holds, or nothing was left to skip)."""
    if run.max_cost_usd is None or run.is_terminal:
        return 0
    spent = run_cost(run)
    # Reported costs are floats: a sum a rounding short of the budget has reached it.
    if spent + 1e-9 < float(run.max_cost_usd):
        return 0
    jobs = queue.jobs_cancel(run_id=run.pk, not_started=True, reason=BUDGET_REASON)
    if not jobs:
        return 0
    said = budget_text(run.max_cost_usd)
    cases = {
        case.key: case
        for case in Case.objects.filter(
            dataset_id=run.dataset_id, key__in={job.case_key for job in jobs}
        )
    }
    first = last_result_seq(run) + 1
    CaseResultRow.objects.bulk_create(
        CaseResultRow(
            run=run,
            case=cases[job.case_key],
            repeat=job.repeat,
            seq=seq,
            status="skipped",
            **settled_fields(Grade(verdict="skipped", score=0.0, detail=said)),
        )
        for seq, job in enumerate(jobs, start=first)
    )
    running = queue.run_load(run.pk)[0]
    tail = f"; {running} running finish" if running else ""
    event(
        run,
        f"{said[0].upper()}{said[1:]} (${spent:.2f} reported): {len(jobs)} cases not started "
        f"skipped{tail}.",
        EventLevel.WARNING,
    )
    return len(jobs)
