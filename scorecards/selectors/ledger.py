"""Reads of the attempt ledger: how a refused late result kept on an attempt (a shadow) reads
— graded for display only, never counted or scored into its run."""

from __future__ import annotations

from pydantic import ValidationError

from runnercli.protocol import CaseResult, HarnessSpec
from runners.models import JobAttempt
from scorecards import scoring
from scorecards.models import Case, Run
from scorecards.verifying import verified_fields

_WOULD = {"pass": "would pass", "fail": "would fail", "error": "would be an error"}


def shadow_grade(attempt: JobAttempt) -> scoring.Grade | None:
    """The grade the attempt's shadow result would have had (None when it has none)."""
    if attempt.shadow_result is None:
        return None
    job = attempt.job
    run = Run.objects.select_related("harness").get(pk=job.run_id)
    case = Case.objects.filter(dataset_id=run.dataset_id, key=job.case_key).first()
    try:
        result = CaseResult.model_validate(attempt.shadow_result)
    except ValidationError:
        return scoring.Grade(verdict="error", score=0.0, detail="kept result is unreadable")
    return scoring.grade(
        spec=HarnessSpec.model_validate(run.harness.spec),
        status=result.status,
        output=result.output,
        exit_code=result.exit_code,
        expected=case.expected if case is not None else None,
        **verified_fields(result),
        tests=case.tests if case is not None else None,
    )


def shadow_summary(attempt: JobAttempt) -> str:
    """ "late result from laptop, attempt 1 (expired): would pass" — empty without a shadow."""
    grade = shadow_grade(attempt)
    if grade is None:
        return ""
    number = JobAttempt.objects.filter(job_id=attempt.job_id, epoch__lte=attempt.epoch).count()
    who = attempt.runner.label if attempt.runner is not None else "a runner since deleted"
    cut = " (judged on a cut output)" if " cut " in attempt.shadow_reason else ""
    return (
        f"late result from {who}, attempt {number} ({attempt.status}): {_WOULD[grade.verdict]}{cut}"
    )
