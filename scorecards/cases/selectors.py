"""One case of a run, whole: its input and expected value, each repeat's result and job, the
attempt ledger behind each job (with any late results kept as shadows), and the case's log
lines."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import ValidationError

from core.errors import NotFound
from runnercli.protocol import HarnessSpec
from runners.models import JobAttempt, JobLogLine, RunnerJob
from scorecards.blobs.diffs import protected_diff
from scorecards.links import key_may_exist
from scorecards.models import Case, CaseResult, Run, VerdictEntry
from scorecards.selectors.runs import LogRow, run_get

if TYPE_CHECKING:
    from django.contrib.auth.models import User

CASE_LOG_LINES = 2000


@dataclass(frozen=True)
class CaseDetail:
    run: Run
    case: Case
    spec: HarnessSpec
    results: dict[int, CaseResult]  # by repeat
    jobs: dict[int, RunnerJob]  # by repeat
    attempts: dict[int, list[JobAttempt]]  # by job id, in epoch order
    logs: list[LogRow]  # the first CASE_LOG_LINES, and one more when there are more
    history: dict[int, list[VerdictEntry]] = field(default_factory=dict)  # by result id
    # The agent's diff of the protected paths it changed, by result id (tampered ones only).
    protected: dict[int, str] = field(default_factory=dict)

    @property
    def repeats(self) -> list[int]:
        """The repeats with a result or a job, in order."""
        return sorted(set(self.results) | set(self.jobs))


def _spec(run: Run) -> HarnessSpec:
    """The spec whose grader scored the run's verdicts (another version's after a regrade)."""
    try:
        return HarnessSpec.model_validate((run.graded_with or run.harness).spec)
    except ValidationError:
        # A version stored under older rules still shows; it is judged as plain text.
        return HarnessSpec.model_validate({"command": ["?"], "grader": {"type": "exact"}})


def _attempts(job_ids: list[int]) -> dict[int, list[JobAttempt]]:
    by_job: dict[int, list[JobAttempt]] = {}
    ledger = (
        JobAttempt.objects.filter(job_id__in=job_ids)
        .select_related("runner")
        .order_by("job_id", "epoch")
    )
    for attempt in ledger:
        by_job.setdefault(attempt.job_id, []).append(attempt)
    return by_job


def _logs(run: Run, key: str, job_ids: list[int]) -> list[LogRow]:
    rows = (
        JobLogLine.objects.filter(run=run, job_id__in=job_ids)
        .order_by("pk")
        .values_list("pk", "at", "line")[: CASE_LOG_LINES + 1]
    )
    return [(seq, at, key, line) for seq, at, line in rows]


def case_detail(*, user: User, run_id: int, key: str) -> CaseDetail:
    """One case of a run the user can see; NotFound for a key the run's dataset lacks."""
    run = run_get(user=user, run_id=run_id)
    cases = Case.objects.filter(dataset_id=run.dataset_id, key=key)
    case = cases.first() if key_may_exist(key) else None
    if case is None:
        raise NotFound(f"Case {key!r} not found in run {run_id}.")
    jobs = {
        j.repeat: j
        for j in RunnerJob.objects.filter(run=run, case_key=key).only("pk", "repeat", "status")
    }
    job_ids = [j.pk for j in jobs.values()]
    results = {
        r.repeat: r
        for r in CaseResult.objects.filter(run=run, case=case)
        .select_related("verdict_by")
        .prefetch_related("artifacts__blob")
    }
    return CaseDetail(
        run=run,
        case=case,
        spec=_spec(run),
        results=results,
        jobs=jobs,
        attempts=_attempts(job_ids),
        logs=_logs(run, key, job_ids),
        history=verdict_history([r.pk for r in results.values()]),
        protected={
            r.pk: protected_diff(r.artifacts.all(), r.tampered)
            for r in results.values()
            if r.tampered
        },
    )


def verdict_history(result_ids: list[int]) -> dict[int, list[VerdictEntry]]:
    """Every verdict these results had, oldest first, by result id."""
    history: dict[int, list[VerdictEntry]] = {}
    entries = VerdictEntry.objects.filter(result_id__in=result_ids).select_related("harness", "by")
    for entry in entries.order_by("result_id", "at", "pk"):
        history.setdefault(entry.result_id, []).append(entry)
    return history
