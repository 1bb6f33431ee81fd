"""One case of a run, whole: its input and expected value, each repeat's output (with a diff
against the expected value, or as pretty JSON), the grader's reason, the attempt ledger with
any late results kept as shadows, and the case's log lines."""

from __future__ import annotations

import difflib
import json
from typing import Any

from pydantic import ValidationError

from core.errors import NotFound
from runnercli.protocol import HarnessSpec
from runners.models import JobAttempt, JobLogLine, RunnerJob
from scorecards import scoring
from scorecards.case_replies import (
    AttemptItem,
    CaseRepeat,
    CaseReply,
    CaseRunResult,
    DiffLine,
    ShadowItem,
)
from scorecards.models import Case, CaseResult, Run, Verdict
from scorecards.replies import LogLine
from scorecards.selectors.runs import run_get

CASE_LOG_LINES = 2000
MAX_DIFF_LINES = 2000
SHADOW_PREVIEW_CHARS = 1024
_DIFF_GRADERS = ("exact", "contains")


def _expected_text(expected: Any) -> str:
    return expected if isinstance(expected, str) else json.dumps(expected, ensure_ascii=False)


def output_diff(spec: HarnessSpec, output: str, expected: Any) -> list[DiffLine] | None:
    """Expected against what the grader read, line by line, for the exact and contains
    graders; None for other graders or when there is nothing to compare."""
    if spec.grader.type not in _DIFF_GRADERS or expected is None:
        return None
    subject = scoring.graded_text(spec=spec, output=output)
    if subject is None:
        return None
    wanted = _expected_text(expected)
    if spec.grader.type == "exact":
        wanted, subject = wanted.strip(), subject.strip()
    a, b = wanted.splitlines()[:MAX_DIFF_LINES], subject.splitlines()[:MAX_DIFF_LINES]
    lines: list[DiffLine] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            lines += [DiffLine(op=" ", text=text) for text in a[i1:i2]]
            continue
        lines += [DiffLine(op="-", text=text) for text in a[i1:i2]]
        lines += [DiffLine(op="+", text=text) for text in b[j1:j2]]
    return lines


def pretty_json(output: str, kind: str) -> str | None:
    """The output re-indented, when it is a JSON document (always tried for `json` output)."""
    if kind != "json" and not output.lstrip().startswith(("{", "[")):
        return None
    try:
        return json.dumps(json.loads(output), indent=2, ensure_ascii=False)
    except ValueError:
        return None


def _cost(usage: dict[str, Any] | None) -> float | None:
    value = (usage or {}).get("total_cost_usd")
    return float(value) if isinstance(value, int | float) else None


def _result(row: CaseResult, spec: HarnessSpec, expected: Any) -> CaseRunResult:
    return CaseRunResult(
        seq=row.seq,
        verdict=row.verdict,
        score=row.score,
        status=row.status,
        output=row.output,
        output_json=pretty_json(row.output, spec.output),
        diff=output_diff(spec, row.output, expected) if row.status == "completed" else None,
        stderr_tail=row.stderr_tail,
        reason=row.reason or row.error,
        error=row.error,
        exit_code=row.exit_code,
        duration_ms=row.duration_ms,
        usage=row.usage,
        cost_usd=_cost(row.usage),
        fingerprint=row.fingerprint or {},
        provenance=row.provenance or {},
        runner=row.runner_id,
        settled_at=row.created_at,
    )


def _shadow(attempt: JobAttempt, spec: HarnessSpec, expected: Any) -> ShadowItem | None:
    """The late result kept on an attempt, judged as it would have been (never counted)."""
    kept = attempt.shadow_result
    if not isinstance(kept, dict):
        return None
    status = str(kept.get("status", ""))
    output = str(kept.get("output", ""))
    exit_code = kept.get("exit_code")
    grade = scoring.grade(
        spec=spec,
        status=status,
        output=output,
        exit_code=exit_code if isinstance(exit_code, int) else None,
        expected=expected,
    )
    return ShadowItem(
        at=attempt.shadow_at,
        reason=attempt.shadow_reason,
        status=status,
        would=grade.verdict,
        output=output[:SHADOW_PREVIEW_CHARS],
    )


def _attempt(attempt: JobAttempt, spec: HarnessSpec, expected: Any) -> AttemptItem:
    runner = attempt.runner
    return AttemptItem(
        epoch=attempt.epoch,
        status=attempt.status,
        runner=f"{runner.label} (#{runner.pk})" if runner else "",
        started_at=attempt.started_at,
        ended_at=attempt.ended_at,
        reason=attempt.reason,
        resumes=attempt.resumes,
        resumed_at=attempt.resumed_at,
        gap_ms=attempt.gap_ms,
        shadow=_shadow(attempt, spec, expected),
    )


def _spec(run: Run) -> HarnessSpec:
    try:
        return HarnessSpec.model_validate(run.harness.spec)
    except ValidationError:
        # A version stored under older rules still shows; it is judged as plain text.
        return HarnessSpec.model_validate({"command": ["?"], "grader": {"type": "exact"}})


def _attempts(job_ids: list[int], spec: HarnessSpec, expected: Any) -> dict[int, list[AttemptItem]]:
    by_job: dict[int, list[AttemptItem]] = {}
    ledger = (
        JobAttempt.objects.filter(job_id__in=job_ids)
        .select_related("runner")
        .order_by("job_id", "epoch")
    )
    for attempt in ledger:
        by_job.setdefault(attempt.job_id, []).append(_attempt(attempt, spec, expected))
    return by_job


def _logs(run: Run, key: str, job_ids: list[int]) -> list[LogLine]:
    rows = (
        JobLogLine.objects.filter(run=run, job_id__in=job_ids)
        .order_by("pk")
        .values_list("pk", "at", "line")[: CASE_LOG_LINES + 1]
    )
    return [LogLine(seq=seq, at=at, case=key, line=line) for seq, at, line in rows]


def case_detail(*, user: Any, run_id: int, key: str) -> CaseReply:
    """One case of a run the user can see; NotFound for a key the run's dataset lacks."""
    run = run_get(user=user, run_id=run_id)
    case = Case.objects.filter(dataset_id=run.dataset_id, key=key).first()
    if case is None:
        raise NotFound(f"Case {key!r} not found in run {run_id}.")
    spec = _spec(run)
    results = {r.repeat: r for r in CaseResult.objects.filter(run=run, case=case)}
    jobs = {
        j.repeat: j
        for j in RunnerJob.objects.filter(run=run, case_key=key).only("pk", "repeat", "status")
    }
    attempts = _attempts([j.pk for j in jobs.values()], spec, case.expected)
    logs = _logs(run, key, [j.pk for j in jobs.values()])
    passes = sum(1 for r in results.values() if r.verdict == Verdict.PASS)
    return CaseReply(
        run=run.pk,
        case=case.key,
        position=case.position,
        input=case.input,
        expected=case.expected,
        grader=spec.grader.model_dump(mode="json", exclude_none=True),
        output_kind=spec.output,
        passes=passes,
        settled=len(results),
        repeats=run.repeats,
        flaky=0 < passes < len(results),
        runs=[
            CaseRepeat(
                repeat=n,
                job_status=jobs[n].status if n in jobs else None,
                result=_result(results[n], spec, case.expected) if n in results else None,
                attempts=attempts.get(jobs[n].pk, []) if n in jobs else [],
            )
            for n in sorted(set(results) | set(jobs))
        ],
        logs=logs[:CASE_LOG_LINES],
        logs_truncated=len(logs) > CASE_LOG_LINES,
    )
