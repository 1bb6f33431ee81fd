"""Settling cases: a runner's fenced result or failure, scored and recorded; the run admits
its next jobs and completes.

Only this package writes results and run state. Each service is one transaction around the
queue's primitives; a run's row is locked before its jobs, everywhere, so two settlements of
one run never deadlock and admission never overshoots concurrency.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connections, transaction
from django.db.models import Q
from django.utils import timezone

from core import prebuilt
from core.errors import Invalid
from core.prebuilt import insert_many
from runnercli.protocol import (
    MAX_RESULTS_BYTES_PER_CALL,
    Ack,
    CaseResult,
    ResultReport,
)
from runners import queue
from runners.models import Runner, RunnerJob
from scorecards import lifecycle
from scorecards.lifecycle import LANES, Read, Stored
from scorecards.models import Case, EventLevel, HarnessVersion, Run, RunStatus, Verdict
from scorecards.models import CaseResult as CaseResultRow
from scorecards.scoring import Grade
from scorecards.selectors.results import last_result_seq
from scorecards.selectors.summary import run_summary
from scorecards.services.budgets import budget_text, run_budget_spend
from scorecards.services.events import event
from scorecards.services.grades import settled_fields
from scorecards.services.grading import Graded, grade_reports, shadow_of
from scorecards.verifying import verified_fields


def _result_digest(result: CaseResult) -> str:
    return hashlib.sha256(result.model_dump_json().encode()).hexdigest()


@cache
def _locked_runs_sql(alias: str, count: int) -> tuple[str, tuple[prebuilt.Columns, ...]]:
    """The runs of `count` jobs with their harness versions and submitters, locked in id
    order: SQL built once per process and count."""
    connection = connections[alias]
    user_model = get_user_model()
    parts = (
        prebuilt.columns(Run, alias),
        prebuilt.columns(HarnessVersion, alias),
        prebuilt.columns(user_model, alias),
    )
    selected = ", ".join(
        name
        for part, table_alias in zip(parts, ("r", "hv", "u"), strict=True)
        for name in part.select(table_alias, alias)
    )

    def col(model: Any, name: str, table_alias: str) -> str:
        return f"{table_alias}.{prebuilt.column(model, name, alias)}"

    marks = ", ".join(["%s"] * count)
    sql = (
        f"SELECT {selected} FROM {prebuilt.table(Run, alias)} r "
        f"JOIN {prebuilt.table(HarnessVersion, alias)} hv "
        f"ON {col(HarnessVersion, 'id', 'hv')} = {col(Run, 'harness_id', 'r')} "
        f"JOIN {connection.ops.quote_name(user_model._meta.db_table)} u "
        f"ON {col(user_model, 'id', 'u')} = {col(Run, 'submitted_by_id', 'r')} "
        f"WHERE {col(Run, 'id', 'r')} IN (SELECT {col(RunnerJob, 'run_id', 'j')} "
        f"FROM {prebuilt.table(RunnerJob, alias)} j "
        f"WHERE {col(RunnerJob, 'id', 'j')} IN ({marks})) "
        f"ORDER BY {col(Run, 'id', 'r')}"
    )
    if connection.features.has_select_for_update_of:
        sql += " FOR UPDATE OF r"
    return sql, parts


def locked_runs_of(job_ids: Sequence[int]) -> dict[int, Run]:
    """Lock the runs these jobs belong to, in id order, before their jobs (the lock order
    everywhere), their harness versions and submitters read with them: one statement."""
    alias = Run.objects.db
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    sql, (run_part, harness_part, user_part) = _locked_runs_sql(alias, len(ids))
    with prebuilt.cursor(alias) as cursor:
        cursor.execute(sql, ids)
        rows = cursor.fetchall()
    runs: dict[int, Run] = {}
    first, second = len(run_part.names), len(run_part.names) + len(harness_part.names)
    for row in rows:
        run = run_part.instance(alias, row[:first])
        run.harness = harness_part.instance(alias, row[first:second])
        run.submitted_by = user_part.instance(alias, row[second:])
        runs[run.pk] = run
    return runs


def locked_run_of(job_id: int) -> Run | None:
    return next(iter(locked_runs_of([job_id]).values()), None)


def provenance_for(runner: Runner, run: Run) -> dict[str, str]:
    return {
        "ran_on": "self-hosted",
        "runner": f"{runner.pk}/{runner.label}",
        "by": run.submitted_by.get_username(),
    }


def result_submit(*, runner: Runner, job_id: int, lease_epoch: int, result: CaseResult) -> Ack:
    """Accept one fenced result: settle the attempt, score it, record it, advance the run."""
    report = ResultReport(job_id=job_id, lease_epoch=lease_epoch, result=result)
    return results_submit(runner=runner, reports=[report])[0]


def _outcome(report: ResultReport) -> queue.Outcome:
    return queue.Outcome(
        job_id=report.job_id,
        lease_epoch=report.lease_epoch,
        succeeded=report.result.status == "completed",
        result_digest=_result_digest(report.result),
        reason="" if report.result.status == "completed" else report.result.status,
        shadow=lambda: shadow_of(report.result),
        log_tail=report.result.log_tail,
    )


def results_submit(*, runner: Runner, reports: Sequence[ResultReport]) -> list[Ack]:
    """Accept fenced results in one transaction: settle and record each, then advance each
    run once. One ack per report, in order; a refused one changes nothing of its own but,
    when it is the runner's own late result, is kept on its attempt as a shadow.

    Outputs are parsed and graded before the transaction: it holds the runs' row locks
    (and on SQLite the single write lock), and only records.
    """
    if len({r.job_id for r in reports}) != len(reports):
        raise Invalid({"results": ["Each job may appear once per call."]})
    if sum(r.size for r in reports) > MAX_RESULTS_BYTES_PER_CALL:
        raise Invalid(
            {
                "results": [
                    f"Outputs and stderr tails over {MAX_RESULTS_BYTES_PER_CALL} bytes"
                    " in one call: send fewer results per call."
                ]
            }
        )
    graded = grade_reports(runner=runner, reports=reports)
    with transaction.atomic():
        runs = locked_runs_of([r.job_id for r in reports])
        # A result a feature refuses (naming a blob its workspace lacks) is refused whole,
        # before it settles: the runner sends what was missing, then the result again.
        refusals = lifecycle.result_refusals(runner=runner, reports=reports)
        settling = [r for r in reports if r.job_id not in refusals]
        settled = queue.jobs_settle(runner=runner, outcomes=[_outcome(r) for r in settling])
        accepted: dict[int, list[tuple[RunnerJob, CaseResult, Graded]]] = {}
        laned: set[int] = set()
        for report, settlement in zip(settling, settled, strict=True):
            job = settlement.job
            if settlement.resumed and job is not None and job.run_id in runs:
                resumed_event(runs[job.run_id], job, runner)
            if not settlement.ended or job is None or job.run_id not in runs:
                continue
            outcome = graded[job.pk]
            if isinstance(outcome, Read):
                run = runs[job.run_id]
                outcome.lane.record(
                    run=run, job=job, runner=runner, result=report.result, read=outcome.value
                )
                laned.add(job.run_id)
            else:
                accepted.setdefault(job.run_id, []).append((job, report.result, outcome))
        for run_id, results in accepted.items():
            rows = _result_rows(runs[run_id], runner, results)
            insert_many(rows, CaseResultRow.objects.db)
            stored = [
                Stored(row=row, result=result, job=job)
                for row, (job, result, _) in zip(rows, results, strict=True)
            ]
            lifecycle.stored_keep(run=runs[run_id], stored=stored)
        for run_id in sorted(accepted.keys() | laned):
            # A cost recorded may spend the run's budget: its cases not started are skipped.
            run_budget_spend(runs[run_id])
            run_advance(runs[run_id])
    acks = iter(s.ack() for s in settled)
    return [
        Ack(accepted=False, reason=refusals[r.job_id]) if r.job_id in refusals else next(acks)
        for r in reports
    ]


def _result_rows(
    run: Run, runner: Runner, results: list[tuple[RunnerJob, CaseResult, Graded]]
) -> list[CaseResultRow]:
    """The rows of a run's settled results, graded already."""
    provenance = provenance_for(runner, run)
    first = next_result_seq(run)
    return [
        CaseResultRow(
            run=run,
            case=graded.case,
            repeat=job.repeat,
            seq=seq,
            attempt_id=job.current_attempt_id,
            runner=runner,
            status=result.status,
            output=graded.output,
            exit_code=result.exit_code,
            stderr_tail=graded.stderr_tail,
            duration_ms=result.duration_ms,
            usage=graded.usage,
            provenance=provenance,
            fingerprint=result.fingerprint.model_dump(mode="json"),
            **verified_fields(result),
            stopped=None if result.stopped is None else result.stopped.model_dump(mode="json"),
            phases=None if result.phases is None else result.phases.model_dump(mode="json"),
            **settled_fields(graded.grade),
        )
        for seq, (job, result, graded) in enumerate(results, start=first)
    ]


def next_result_seq(run: Run) -> int:
    """The settlement number of the run's next result (the run's row is locked)."""
    return last_result_seq(run) + 1


def failure_report(
    *, runner: Runner, job_id: int, lease_epoch: int, message: str, retryable: bool = False
) -> Ack:
    """A runner could not run a case: requeue it, or record an `error` when it is done for."""
    with transaction.atomic():
        run = locked_run_of(job_id)
        settled = queue.job_fail(
            runner=runner,
            job_id=job_id,
            lease_epoch=lease_epoch,
            message=message,
            retryable=retryable,
        )
        if not settled.accepted or run is None or settled.job is None:
            return settled.ack()
        job = settled.job
        if settled.requeued:
            event(
                run,
                f"Case {job.case_key}: runner {runner.label} failed (retryable): {message}"
                " — requeued.",
                EventLevel.WARNING,
            )
        else:
            record_error(run, job, message, runner=runner)
            run_advance(run)
        if settled.resumed:
            resumed_event(run, job, runner)
    return settled.ack()


def resumed_event(run: Run, job: RunnerJob, runner: Runner) -> None:
    event(
        run,
        f"Case {job.case_key}: runner {runner.label} took back its lapsed lease "
        f"(attempt {job.attempts} of {job.max_attempts}) — resumed, not rerun.",
    )


def record_error(run: Run, job: RunnerJob, reason: str, *, runner: Runner | None) -> None:
    """Record that a job ended without a result: a case's `error`, or the loss of another
    lane's report (a judge's vote)."""
    lane = LANES.get(job.kind)
    if lane is not None:
        lane.lost(run=run, job=job, reason=reason)
        return
    case = Case.objects.get(dataset_id=run.dataset_id, key=job.case_key)
    CaseResultRow.objects.get_or_create(
        run=run,
        case=case,
        repeat=job.repeat,
        defaults={
            "seq": next_result_seq(run),
            "attempt_id": job.current_attempt_id,
            "runner": runner,
            "status": "error",
            **settled_fields(Grade(verdict="error", score=0.0, detail=reason)),
            "provenance": provenance_for(runner, run) if runner else {},
        },
    )


def run_advance(run: Run) -> None:
    """Admit the run's next pending jobs up to its concurrency; complete it when done.

    Called on every settled case, so it reads only the run's active jobs (at most its
    concurrency, through the (run, status) index) and whether one is pending, never a count
    over the whole run: one statement, and the admission's UPDATE only when one is pending.
    """
    now = timezone.now()
    if run.status == RunStatus.QUEUED:
        run.status = RunStatus.RUNNING
        run.started_at = run.started_at or now
        Run.objects.filter(pk=run.pk).update(status=run.status, started_at=run.started_at)
    if run.is_terminal:
        return
    active, pending = queue.run_load(run.pk)
    if pending and active < run.concurrency:
        queue.jobs_admit(
            run_id=run.pk, owner_id=run.submitted_by_id, limit=run.concurrency - active
        )
        return
    # A run stays running while its judges are due.
    judging = Q(verdict=Verdict.JUDGING) | Q(grader_verdict=Verdict.JUDGING)
    if active == 0 and not pending and not run.results.filter(judging).exists():
        run_complete(run, now)


def run_complete(run: Run, now: datetime) -> None:
    errors = run.results.filter(verdict=Verdict.ERROR).count()
    run.status = RunStatus.FAILED if errors else RunStatus.SUCCEEDED
    run.finished_at = now
    Run.objects.filter(pk=run.pk).update(status=run.status, finished_at=now)
    summary = run_summary(run)
    skipped = f", {summary['skipped']} skipped" if summary["skipped"] else ""
    event(
        run,
        f"Run {run.status}: {summary['pass']} pass, {summary['fail']} fail, "
        f"{summary['error']} error{skipped}.",
        EventLevel.ERROR if errors else EventLevel.INFO,
    )
    if summary["budget_ended"]:
        spent = summary["cost_usd"] + summary.get("judge_cost_usd", 0.0)
        over = spent - float(run.max_cost_usd or 0)
        event(
            run,
            f"Ended by its {budget_text(run.max_cost_usd or 0)}: "
            + (
                f"${spent:.2f} reported, ${over:.2f} over it — cases running when it was "
                "reached finished."
                if over > 1e-9
                else f"${spent:.2f} reported."
            ),
            EventLevel.WARNING,
        )
