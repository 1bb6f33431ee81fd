"""Grading reported results before anything is locked: output parsed, graded and its usage
read while no transaction holds a run's row (nor, on SQLite, the single write lock). What
grading reads — a run's harness version, a case's expectation — is immutable, so a grade
taken before the lock is the grade the locked transaction records.

Also the bounded copy of a result kept as a shadow when the fence refuses it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from runnercli.protocol import CaseResult, HarnessSpec, ResultReport
from runners import metrics
from runners.models import Runner, RunnerJob
from scorecards import scoring
from scorecards.lifecycle import LANES, Read
from scorecards.models import Case
from scorecards.verifying import verified_fields


@dataclass(frozen=True)
class Graded:
    """One reported result, graded: what the settle transaction records if it is accepted."""

    case: Case
    grade: scoring.Grade
    output: str
    stderr_tail: str
    usage: dict[str, Any] | None


def storable(text: str) -> str:
    # PostgreSQL text cannot hold NUL; a harness printing binary must not lose its result.
    return text.replace("\x00", "\ufffd")


def grade_reports(*, runner: Runner, reports: Sequence[ResultReport]) -> dict[int, Graded | Read]:
    """Grade each report of one of the runner owner's jobs, by job id (no lock taken): the
    jobs with their runs' harnesses in one query, their cases in another. A job of another
    lane (a judge's) is read by its lane."""
    jobs = {
        job.pk: job
        for job in RunnerJob.objects.filter(
            pk__in=[r.job_id for r in reports], owner_id=runner.owner_id
        )
        .select_related("run__harness")
        .only("pk", "run_id", "case_key", "kind", "run__dataset_id", "run__harness__spec")
    }
    runs = {job.run_id: job.run for job in jobs.values()}
    wanted = {(runs[job.run_id].dataset_id, job.case_key) for job in jobs.values()}
    cases = {
        (case.dataset_id, case.key): case
        for case in Case.objects.filter(
            dataset_id__in={dataset for dataset, _ in wanted},
            key__in={key for _, key in wanted},
        ).only("pk", "dataset_id", "key", "input", "expected", "tests")
    }
    specs = {pk: HarnessSpec.model_validate(run.harness.spec) for pk, run in runs.items()}
    graded: dict[int, Graded | Read] = {}
    for report in reports:
        job = jobs.get(report.job_id)
        if job is None:
            continue
        lane = LANES.get(job.kind)
        if lane is not None:
            graded[job.pk] = Read(lane, lane.read(report.result))
            continue
        case = cases.get((runs[job.run_id].dataset_id, job.case_key))
        if case is not None:
            metrics.GRADINGS.inc()
            graded[job.pk] = grade_one(specs[job.run_id], case, report.result)
    return graded


def grade_one(spec: HarnessSpec, case: Case, result: CaseResult) -> Graded:
    output, stderr_tail = storable(result.output), storable(result.stderr_tail)
    grade = scoring.grade(
        spec=spec,
        status=result.status,
        output=output,
        exit_code=result.exit_code,
        expected=case.expected,
        **verified_fields(result),
        tests=case.tests,
    )
    return Graded(
        case=case,
        grade=grade,
        output=output,
        stderr_tail=stderr_tail,
        usage=scoring.extract_usage(output, spec.output, result.usage),
    )


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


def _cut(text: str, limit: int) -> str:
    return text.encode()[: max(0, limit)].decode(errors="ignore")


def shadow_of(result: CaseResult) -> tuple[dict[str, Any], str]:
    """The result as kept on its attempt when refused, within EVERDICT_SHADOW_MAX_BYTES: the
    output (then the stderr tail) cut to fit, and a note saying so (empty when whole)."""
    limit = settings.EVERDICT_SHADOW_MAX_BYTES
    kept = result.model_dump(mode="json")
    kept["output"], kept["stderr_tail"] = storable(result.output), storable(result.stderr_tail)
    size = _size(kept)
    if size <= limit:
        return kept, ""
    notes = []
    for field in ("log_tail", "usage"):
        if size > limit and kept.get(field):
            kept[field] = [] if field == "log_tail" else None
            size = _size(kept)
    for field in ("output", "stderr_tail"):
        if size <= limit:
            break
        before = len(kept[field].encode())
        # JSON escaping can make text grow: cut by what is over, then check again.
        while size > limit and kept[field]:
            kept[field] = _cut(kept[field], len(kept[field].encode()) - (size - limit) - 16)
            size = _size(kept)
        notes.append(f"{field} cut from {before} to {len(kept[field].encode())} bytes")
    return kept, f"{', '.join(notes) or 'cut'} to fit EVERDICT_SHADOW_MAX_BYTES ({limit})"
