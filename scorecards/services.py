"""Scorecard runs: dispatch to a member's runners, results, failures, cancel, scheduling.

Only this module writes results and run state. Each service is one transaction around
the queue's primitives; a run's row is locked before its jobs, everywhere, so two
settlements of one run never deadlock and admission never overshoots concurrency.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet, Subquery
from django.utils import timezone

from everdict.errors import Invalid, NotFound, PermissionDenied, QuotaExceeded
from runnercli.protocol import (
    MAX_RESULTS_BYTES_PER_CALL,
    Ack,
    CaseResult,
    HarnessSpec,
    ResultReport,
)
from runners import queue
from runners.models import JobLogLine, JobStatus, Runner, RunnerJob
from scorecards import scoring
from scorecards.catalog import dataset_get, harness_get
from scorecards.models import (
    Case,
    EventLevel,
    Role,
    Run,
    RunEvent,
    RunStatus,
    Verdict,
    Workspace,
)
from scorecards.models import CaseResult as CaseResultRow
from scorecards.workspaces import membership_for, require_role

RUNTIME_RE = re.compile(r"^self:(any|\d{1,18})$")
MAX_CONCURRENCY = 256
OFFLINE_HINT = "start it with `python -m runnercli run`"


@dataclass(frozen=True)
class Target:
    runner: Runner | None  # None: any of the submitter's capable runners
    candidates: list[Runner]


def _parse_runtime(runtime: str) -> str:
    match = RUNTIME_RE.match(runtime or "")
    if match is None:
        raise Invalid(
            {"runtime": [f"Unknown runtime {runtime!r}: use `self:<runner_id>` or `self:any`."]}
        )
    return match.group(1)


def runtime_resolve(*, user: Any, runtime: str, capabilities: list[str]) -> Target:
    """Resolve a runtime against the submitter's own runners, never anyone else's.

    Someone else's runner id is NotFound even for a workspace admin; no runner is
    NotFound; none with the harness's capabilities is Invalid. Offline is not an error.
    """
    which = _parse_runtime(runtime)
    mine = Runner.objects.owned_by(user).active()
    if which == "any":
        candidates = list(mine)
        if not candidates:
            raise NotFound("You have no runners: pair one on your account page first.")
        capable = [r for r in candidates if r.has_capabilities(capabilities)]
        if not capable:
            raise Invalid(
                {"runtime": [f"None of your runners has the capabilities {capabilities}."]}
            )
        return Target(runner=None, candidates=capable)
    runner = mine.filter(pk=int(which)).first()
    if runner is None:
        raise NotFound(f"Runner {which} not found among your runners.")
    missing = sorted(set(capabilities) - set(runner.capabilities or []))
    if missing:
        raise Invalid({"runtime": [f"Runner {runner.label!r} lacks the capabilities {missing}."]})
    return Target(runner=runner, candidates=[runner])


def _check_quota(workspace: Workspace, now: datetime) -> None:
    if workspace.run_quota is None:
        return
    month_start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    used = Run.objects.filter(workspace=workspace, created_at__gte=month_start).count()
    if used >= workspace.run_quota:
        raise QuotaExceeded(
            f"Workspace {workspace.slug!r} has used its run quota "
            f"({workspace.run_quota} runs this month)."
        )


def _event(run: Run, message: str, level: str = EventLevel.INFO) -> RunEvent:
    return RunEvent.objects.create(run=run, level=level, message=message[:1000])


def run_start(
    *,
    user: Any,
    workspace_slug: str,
    harness: str,
    dataset: str,
    runtime: str,
    concurrency: int = 1,
    harness_version: int | None = None,
    dataset_version: int | None = None,
) -> Run:
    """Start a scorecard run on the submitter's runner(s): one queued job per case.

    A self-hosted run spends the member's own login: it counts against the workspace's
    run quota but never draws its USD/token budget.
    """
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise Invalid({"concurrency": [f"Must be between 1 and {MAX_CONCURRENCY}."]})
    require_role(user=user, slug=workspace_slug, role=Role.MEMBER)
    with transaction.atomic():
        # The workspace row serializes run creation, so the quota holds under races.
        workspace = Workspace.objects.select_for_update().get(slug=workspace_slug)
        hv = harness_get(workspace=workspace, name=harness, version=harness_version)
        dv = dataset_get(workspace=workspace, name=dataset, version=dataset_version)
        spec = HarnessSpec.model_validate(hv.spec)
        target = runtime_resolve(user=user, runtime=runtime, capabilities=spec.capabilities)
        now = timezone.now()
        _check_quota(workspace, now)
        run = Run.objects.create(
            workspace=workspace,
            harness=hv,
            dataset=dv,
            runtime=runtime,
            runner=target.runner,
            concurrency=concurrency,
            submitted_by=user,
            created_at=now,
        )
        count = _park_jobs(run, spec, target, now)
        _event(run, f"Dispatched {count} cases of {hv} over {dv} to {_target_name(target)}.")
        offline = [r for r in target.candidates if not r.is_online]
        if offline and len(offline) == len(target.candidates):
            names = ", ".join(r.label for r in offline)
            _event(
                run,
                f"Runner {names} is offline — {OFFLINE_HINT}",
                EventLevel.WARNING,
            )
        if count == 0:
            _run_complete(run, now)
    return run


def _target_name(target: Target) -> str:
    if target.runner is not None:
        return f"runner {target.runner.label} (#{target.runner.pk})"
    return "any of the submitter's runners"


def _park_jobs(run: Run, spec: HarnessSpec, target: Target, now: datetime) -> int:
    """Queue one job per case; the first `concurrency` are admitted at once."""
    shared = {
        "run_id": run.pk,
        "workspace": run.workspace.slug,
        "submitted_by": run.submitted_by.get_username(),
        "harness": {
            "name": run.harness.name,
            "version": run.harness.version,
            "spec": run.harness.spec,
        },
        "capabilities": spec.capabilities,
        "timeout_s": spec.timeout_s,
    }
    # Read in full first: on PostgreSQL the jobs are written with COPY, and a connection
    # cannot read from a server-side cursor while a COPY is in progress.
    cases = list(
        Case.objects.filter(dataset=run.dataset).order_by("position").values_list("key", "input")
    )
    return queue.jobs_park(
        owner_id=run.submitted_by_id,
        runner_id=target.runner.pk if target.runner else None,
        run_id=run.pk,
        shared=shared,
        cases=cases,
        required_capabilities=spec.capabilities,
        admit=run.concurrency,
        max_attempts=settings.EVERDICT_MAX_ATTEMPTS,
    )


# ------------------------------------------------------------------ settling


def _result_digest(result: CaseResult) -> str:
    return hashlib.sha256(result.model_dump_json().encode()).hexdigest()


def _locked_runs_of(job_ids: Sequence[int]) -> dict[int, Run]:
    """Lock the runs these jobs belong to, in id order, before their jobs (the lock order
    everywhere): one statement."""
    of_jobs = RunnerJob.objects.filter(pk__in=job_ids).values("run_id")
    runs = (
        Run.objects.select_for_update(of=("self",))
        .select_related("harness", "submitted_by")
        .filter(pk__in=Subquery(of_jobs))
        .order_by("pk")
    )
    return {run.pk: run for run in runs}


def _locked_run_of(job_id: int) -> Run | None:
    return next(iter(_locked_runs_of([job_id]).values()), None)


def provenance_for(runner: Runner, run: Run) -> dict[str, str]:
    return {
        "ran_on": "self-hosted",
        "runner": f"{runner.pk}/{runner.label}",
        "by": run.submitted_by.get_username(),
    }


def _storable(text: str) -> str:
    # PostgreSQL text cannot hold NUL; a harness printing binary must not lose its result.
    return text.replace("\x00", "\ufffd")


def result_submit(*, runner: Runner, job_id: int, lease_epoch: int, result: CaseResult) -> Ack:
    """Accept one fenced result: settle the attempt, score it, record it, advance the run."""
    report = ResultReport(job_id=job_id, lease_epoch=lease_epoch, result=result)
    return results_submit(runner=runner, reports=[report])[0]


def results_submit(*, runner: Runner, reports: Sequence[ResultReport]) -> list[Ack]:
    """Accept fenced results in one transaction: settle, score and record each, then advance
    each run once. One ack per report, in order; a refused one changes nothing of its own."""
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
    outcomes = [
        queue.Outcome(
            job_id=r.job_id,
            lease_epoch=r.lease_epoch,
            succeeded=r.result.status == "completed",
            result_digest=_result_digest(r.result),
            reason="" if r.result.status == "completed" else r.result.status,
        )
        for r in reports
    ]
    with transaction.atomic():
        runs = _locked_runs_of([r.job_id for r in reports])
        settled = queue.jobs_settle(runner=runner, outcomes=outcomes)
        accepted: dict[int, list[tuple[RunnerJob, CaseResult]]] = {}
        for report, settlement in zip(reports, settled, strict=True):
            job = settlement.job
            if settlement.ended and job is not None and job.run_id in runs:
                accepted.setdefault(job.run_id, []).append((job, report.result))
        rows = [
            row
            for run_id, results in accepted.items()
            for row in _result_rows(runs[run_id], runner, results)
        ]
        CaseResultRow.objects.bulk_create(rows)
        for run_id in sorted(accepted):
            _run_advance(runs[run_id])
    return [s.ack() for s in settled]


def _result_rows(
    run: Run, runner: Runner, results: list[tuple[RunnerJob, CaseResult]]
) -> list[CaseResultRow]:
    """Score a run's settled results against its cases' expectations."""
    spec = HarnessSpec.model_validate(run.harness.spec)
    cases = {
        case.key: case
        for case in Case.objects.filter(
            dataset_id=run.dataset_id, key__in=[job.case_key for job, _ in results]
        ).only("pk", "key", "expected")
    }
    provenance = provenance_for(runner, run)
    rows = []
    for job, result in results:
        output, stderr_tail = _storable(result.output), _storable(result.stderr_tail)
        case = cases[job.case_key]
        grade = scoring.grade(
            spec=spec,
            status=result.status,
            output=output,
            exit_code=result.exit_code,
            expected=case.expected,
        )
        rows.append(
            CaseResultRow(
                run=run,
                case=case,
                attempt_id=job.current_attempt_id,
                runner=runner,
                verdict=grade.verdict,
                score=min(1.0, max(0.0, grade.score)),
                status=result.status,
                output=output,
                error="" if grade.verdict != Verdict.ERROR else grade.detail,
                exit_code=result.exit_code,
                stderr_tail=stderr_tail,
                duration_ms=result.duration_ms,
                usage=scoring.extract_usage(output, spec.output, result.usage),
                provenance=provenance,
            )
        )
    return rows


def failure_report(
    *, runner: Runner, job_id: int, lease_epoch: int, message: str, retryable: bool = False
) -> Ack:
    """A runner could not run a case: requeue it, or record an `error` when it is done for."""
    with transaction.atomic():
        run = _locked_run_of(job_id)
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
            _event(
                run,
                f"Case {job.case_key}: runner {runner.label} failed (retryable): {message}"
                " — requeued.",
                EventLevel.WARNING,
            )
        else:
            _record_error(run, job, message, runner=runner)
            _run_advance(run)
    return Ack(accepted=True)


def _record_error(run: Run, job: RunnerJob, reason: str, *, runner: Runner | None) -> None:
    case = Case.objects.get(dataset_id=run.dataset_id, key=job.case_key)
    CaseResultRow.objects.get_or_create(
        run=run,
        case=case,
        defaults={
            "attempt_id": job.current_attempt_id,
            "runner": runner,
            "verdict": Verdict.ERROR,
            "score": 0.0,
            "status": "error",
            "error": reason[:1000],
            "provenance": provenance_for(runner, run) if runner else {},
        },
    )


def _run_advance(run: Run) -> None:
    """Admit the run's next pending jobs up to its concurrency; complete it when done.

    Called on every settled case, so it reads only the run's active jobs (at most its
    concurrency, through the (run, status) index), never a count over the whole run.
    """
    now = timezone.now()
    if run.status == RunStatus.QUEUED:
        run.status = RunStatus.RUNNING
        run.started_at = run.started_at or now
        Run.objects.filter(pk=run.pk).update(status=run.status, started_at=run.started_at)
    if run.is_terminal:
        return
    active = queue.run_active_count(run.pk)
    if active < run.concurrency and queue.jobs_admit(
        run_id=run.pk, owner_id=run.submitted_by_id, limit=run.concurrency - active
    ):
        return
    if active == 0 and not queue.run_has_pending(run.pk):
        _run_complete(run, now)


def _run_complete(run: Run, now: datetime) -> None:
    errors = run.results.filter(verdict=Verdict.ERROR).count()
    run.status = RunStatus.FAILED if errors else RunStatus.SUCCEEDED
    run.finished_at = now
    Run.objects.filter(pk=run.pk).update(status=run.status, finished_at=now)
    summary = run_summary(run)
    _event(
        run,
        f"Run {run.status}: {summary['pass']} pass, {summary['fail']} fail, "
        f"{summary['error']} error.",
        EventLevel.ERROR if errors else EventLevel.INFO,
    )


# ------------------------------------------------------------------- cancel


def run_cancel(*, user: Any, run_id: int) -> Run:
    """Cancel a run: its own submitter (member) or a workspace admin may."""
    run = run_get(user=user, run_id=run_id)
    membership = membership_for(user=user, slug=run.workspace.slug)
    own = run.submitted_by_id == user.pk and membership.allows(Role.MEMBER)
    if not (own or membership.allows(Role.ADMIN)):
        raise PermissionDenied("Only the run's submitter or a workspace admin can cancel it.")
    with transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).get(pk=run_id)
        if run.is_terminal:
            return run
        canceled = queue.jobs_cancel(run_id=run.pk)
        now = timezone.now()
        run.status = RunStatus.CANCELED
        run.finished_at = now
        Run.objects.filter(pk=run.pk).update(status=RunStatus.CANCELED, finished_at=now)
        _event(
            run,
            f"Canceled by {user.get_username()}: {len(canceled)} open cases stopped.",
            EventLevel.WARNING,
        )
    return run


# --------------------------------------------------------------- scheduler


def _scheduler_step(candidates: QuerySet[RunnerJob], settle: Callable[[Run, int], None]) -> bool:
    """Handle one candidate job: lock its run first (the lock order everywhere), then let
    `settle` re-check and change it under the lock. False when there was no candidate."""
    with transaction.atomic():
        job_id = candidates.values_list("pk", flat=True).first()
        if job_id is None:
            return False
        run = _locked_run_of(job_id)
        if run is not None:
            settle(run, job_id)
    return True


def _settle_expired_lease(run: Run, job_id: int) -> None:
    ended = queue.lease_expire(job_id=job_id)
    if ended is None:
        return
    for job in ended.requeued:
        _event(
            run,
            f"Case {job.case_key}: lease expired (no heartbeat) — requeued "
            f"(attempt {job.attempts} of {job.max_attempts}).",
            EventLevel.WARNING,
        )
    for job in ended.jobs:
        _record_error(run, job, job.reason, runner=job.leased_by)
    if ended.jobs:
        _run_advance(run)


def _no_runner_message(run: Run) -> str:
    waited = settings.EVERDICT_QUEUE_IDLE_TIMEOUT_S
    if run.runner is not None:
        state = "offline" if not run.runner.is_online else "online but did not take it"
        who = f"runner {run.runner.label} (#{run.runner.pk}) was {state}"
    else:
        runners = list(Runner.objects.owned_by(run.submitted_by).active())
        listed = ", ".join(f"{r.label} ({'online' if r.is_online else 'offline'})" for r in runners)
        who = f"none of {run.submitted_by.get_username()}'s runners took it: {listed or 'none'}"
    return f"no_runner: no runner leased this case within {waited}s — {who}"


def _settle_idle_queue(run: Run, job_id: int) -> None:
    ended = queue.jobs_idle_expire(job_id=job_id)
    if ended is None:
        return
    message = _no_runner_message(run)
    _event(run, message, EventLevel.ERROR)
    for job in ended.jobs:
        _record_error(run, job, message, runner=None)
    _run_advance(run)


def _settle_revoked_runner(run: Run, job_id: int) -> None:
    ended = queue.jobs_of_revoked_runner_end(job_id=job_id)
    if ended is None:
        return
    _event(run, "Runner revoked: its open cases end as errors.", EventLevel.ERROR)
    for job in ended.jobs:
        _record_error(run, job, "runner revoked", runner=None)
    _run_advance(run)


def scheduler_expire_one_lease() -> bool:
    """Expire one silent lease (requeue, or an `error` when out of attempts)."""
    return _scheduler_step(queue.leases_expired(), _settle_expired_lease)


def scheduler_expire_one_idle_run() -> bool:
    """Fail one run's queue that no runner took within the idle timeout (`no_runner`)."""
    return _scheduler_step(queue.jobs_idle(), _settle_idle_queue)


def scheduler_settle_one_revoked() -> bool:
    """Settle the open jobs of one run pinned to a revoked runner."""
    return _scheduler_step(queue.jobs_of_revoked_runners(), _settle_revoked_runner)


def scheduler_complete_one_run() -> bool:
    """Safety net: complete a run whose jobs have all ended but that is still open."""
    open_jobs = Q(jobs__status__in=(JobStatus.PENDING, JobStatus.QUEUED, JobStatus.LEASED))
    run_id = (
        Run.objects.filter(status__in=(RunStatus.QUEUED, RunStatus.RUNNING))
        .exclude(open_jobs)
        .values_list("pk", flat=True)
        .first()
    )
    if run_id is None:
        return False
    with transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).get(pk=run_id)
        if (
            run.is_terminal
            or run.jobs.filter(
                status__in=(JobStatus.PENDING, JobStatus.QUEUED, JobStatus.LEASED)
            ).exists()
        ):
            return True
        _run_complete(run, timezone.now())
    return True


def operator_job_requeue(*, job_id: int, operator: Any) -> bool:
    """Requeue an open job now (Django admin); its current runner is fenced off."""
    with transaction.atomic():
        run = _locked_run_of(job_id)
        job = queue.job_requeue(job_id=job_id, reason=f"requeued by {operator.get_username()}")
        if job is None or run is None:
            return False
        _event(run, f"Case {job.case_key}: requeued by operator {operator.get_username()}.")
    return True


def operator_job_fail(*, job_id: int, operator: Any) -> bool:
    """Fail an open job now (Django admin), recording an `error` result for its case."""
    reason = f"failed by operator {operator.get_username()}"
    with transaction.atomic():
        run = _locked_run_of(job_id)
        job = queue.job_abort(job_id=job_id, reason=reason)
        if job is None or run is None:
            return False
        _record_error(run, job, reason, runner=None)
        _run_advance(run)
    return True


SCHEDULER_STEPS = (
    scheduler_expire_one_lease,
    scheduler_settle_one_revoked,
    scheduler_expire_one_idle_run,
    scheduler_complete_one_run,
)


# -------------------------------------------------------------------- reads


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


def run_logs(*, user: Any, run_id: int, after: int = 0, limit: int = 1000) -> list[dict[str, Any]]:
    """Log lines pushed by runners for a run, in order, after sequence number `after`."""
    run = run_get(user=user, run_id=run_id)
    rows = (
        JobLogLine.objects.filter(run=run, pk__gt=after)
        .order_by("pk")
        .values_list("pk", "at", "job__case_key", "line")[:limit]
    )
    return [
        {"seq": seq, "at": at.isoformat(), "case": case, "line": line}
        for seq, at, case, line in rows
    ]
