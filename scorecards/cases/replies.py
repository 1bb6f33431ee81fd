"""Reply shapes of one case of a run (`GET /api/runs/<id>/cases/<key>`, the case page): what
went in, what was expected, what came out on each repeat, why it was judged so, and every
attempt behind it."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from core.replies import Reply, Timestamp
from runnercli.protocol import HarnessSpec
from runners.models import JobAttempt
from scorecards import scoring
from scorecards.blobs.replies import ArtifactItem
from scorecards.cases.selectors import CASE_LOG_LINES, CaseDetail
from scorecards.diffs import Line, expected_diff
from scorecards.models import CaseResult, Verdict
from scorecards.replies.marks import PersonMark, VerdictEntryItem
from scorecards.replies.runs import LogLine

SHADOW_PREVIEW_CHARS = 1024


class DiffLine(Reply):
    op: str = Field(description="' ' both, '-' only expected, '+' only output.")
    text: str

    @classmethod
    def of(cls, line: Line) -> DiffLine:
        return cls(op=line.op, text=line.text)


class ShadowItem(Reply):
    """A late result the fence refused, kept on its attempt: never counted."""

    at: Timestamp | None
    reason: str
    status: str
    would: str = Field(description="The verdict it would have had: pass, fail or error.")
    output: str

    @classmethod
    def of(cls, attempt: JobAttempt, spec: HarnessSpec, expected: Any) -> ShadowItem | None:
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
            verify=kept.get("verify"),
            tampered=kept.get("tampered"),
        )
        return cls(
            at=attempt.shadow_at,
            reason=attempt.shadow_reason,
            status=status,
            would=grade.verdict,
            output=output[:SHADOW_PREVIEW_CHARS],
        )


class AttemptItem(Reply):
    epoch: int
    status: str = Field(description="executing, succeeded, failed, expired, superseded, canceled")
    runner: str
    started_at: Timestamp
    ended_at: Timestamp | None
    reason: str
    resumes: int = Field(description="Times its holder took it back after its lease expired.")
    resumed_at: Timestamp | None
    gap_ms: int = Field(description="Time spent expired before being taken back.")
    shadow: ShadowItem | None

    @classmethod
    def of(cls, attempt: JobAttempt, spec: HarnessSpec, expected: Any) -> AttemptItem:
        runner = attempt.runner
        return cls(
            epoch=attempt.epoch,
            status=attempt.status,
            runner=f"{runner.label} (#{runner.pk})" if runner else "",
            started_at=attempt.started_at,
            ended_at=attempt.ended_at,
            reason=attempt.reason,
            resumes=attempt.resumes,
            resumed_at=attempt.resumed_at,
            gap_ms=attempt.gap_ms,
            shadow=ShadowItem.of(attempt, spec, expected),
        )


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


def _diff(spec: HarnessSpec, row: CaseResult, expected: Any) -> list[DiffLine] | None:
    lines = expected_diff(spec, row.output, expected) if row.status == "completed" else None
    return None if lines is None else [DiffLine.of(line) for line in lines]


class TestRow(Reply):
    """One test of a verifier's report and how it ended."""

    name: str
    state: str = Field(description="failed, errored or passed")

    @classmethod
    def of(cls, verify: Any) -> list[TestRow]:
        outcome = verify.get("outcome") if isinstance(verify, dict) else None
        tests = outcome.get("tests") if isinstance(outcome, dict) else None
        if not isinstance(tests, dict):
            return []
        return [
            cls(name=str(name), state=state)
            for state in ("failed", "errored", "passed")
            for name in tests.get(state) or []
        ]


class CaseRunResult(Reply):
    """One settled result of the case, whole."""

    seq: int
    verdict: str
    score: float
    status: str
    output: str
    output_json: str | None = Field(description="The output as pretty JSON, when it is JSON.")
    diff: list[DiffLine] | None = Field(
        description="Expected against output, line by line (exact and contains graders)."
    )
    stderr_tail: str
    reason: str = Field(description="The grader's reason, one sentence.")
    error: str
    exit_code: int | None
    duration_ms: int
    usage: dict[str, Any] | None
    cost_usd: float | None
    fingerprint: dict[str, Any]
    provenance: dict[str, Any]
    judged_by: dict[str, Any] | None = Field(
        default=None,
        description="Who judged it: runner, user, tools, model, prompt_digest, agreement.",
    )
    runner: int | None
    settled_at: Timestamp
    artifacts: list[ArtifactItem] = Field(
        default_factory=list, description="The files the case left, each with its download URL."
    )
    person: PersonMark | None = Field(
        default=None, description="A person's verdict standing over the grader's."
    )
    history: list[VerdictEntryItem] = Field(
        default_factory=list,
        description="Every verdict it had, oldest first (empty while only the settled one).",
    )
    verify: dict[str, Any] | None = Field(
        default=None, description="What the verifier said: exit code, outcome or error, tails."
    )
    tests: list[TestRow] = Field(
        default_factory=list,
        description="The tests of the verifier's JUnit report, failing ones first.",
    )
    tampered: list[dict[str, Any]] | None = Field(
        default=None,
        description="The protected paths the agent changed (null: no path was protected).",
    )
    protected_diff: str = Field(
        default="",
        description="The agent's diff of the protected paths it changed (from repo.diff), "
        "apart from the rest; '' when it changed none.",
    )
    stopped: dict[str, Any] | None = Field(
        default=None, description="What stopped the agent before it ended on its own."
    )
    phases: dict[str, Any] | None = Field(
        default=None, description="Seconds in each phase: setup_s, agent_s, verify_s, collect_s."
    )

    @classmethod
    def of(
        cls,
        row: CaseResult,
        spec: HarnessSpec,
        expected: Any,
        artifacts: list[ArtifactItem] | None = None,
        history: list[Any] | None = None,
        protected_diff: str = "",
    ) -> CaseRunResult:
        return cls(
            seq=row.seq,
            verdict=row.verdict,
            score=row.score,
            status=row.status,
            output=row.output,
            output_json=pretty_json(row.output, spec.output),
            diff=_diff(spec, row, expected),
            stderr_tail=row.stderr_tail,
            reason=row.reason or row.error,
            error=row.error,
            exit_code=row.exit_code,
            duration_ms=row.duration_ms,
            usage=row.usage,
            cost_usd=_cost(row.usage),
            fingerprint=row.fingerprint or {},
            provenance=row.provenance or {},
            judged_by=row.judged_by or None,
            runner=row.runner_id,
            settled_at=row.created_at,
            artifacts=artifacts or [],
            person=PersonMark.of(row),
            history=[VerdictEntryItem.of(entry) for entry in history or []],
            verify=row.verify,
            tests=TestRow.of(row.verify),
            tampered=row.tampered,
            protected_diff=protected_diff,
            stopped=row.stopped,
            phases=row.phases,
        )


class CaseRepeat(Reply):
    repeat: int
    job_status: str | None = Field(description="The queue's state of this repeat's job.")
    result: CaseRunResult | None
    attempts: list[AttemptItem]

    @classmethod
    def of(cls, detail: CaseDetail, repeat: int) -> CaseRepeat:
        job, row = detail.jobs.get(repeat), detail.results.get(repeat)
        spec, expected = detail.spec, detail.case.expected
        attempts = detail.attempts.get(job.pk, []) if job is not None else []
        return cls(
            repeat=repeat,
            job_status=job.status if job is not None else None,
            result=(
                CaseRunResult.of(
                    row,
                    spec,
                    expected,
                    ArtifactItem.list_of(row, detail.run, detail.case.key),
                    detail.history.get(row.pk),
                    detail.protected.get(row.pk, ""),
                )
                if row is not None
                else None
            ),
            attempts=[AttemptItem.of(attempt, spec, expected) for attempt in attempts],
        )


class CaseReply(Reply):
    run: int
    case: str
    position: int
    input: Any
    expected: Any
    grader: dict[str, Any]
    output_kind: str
    passes: int
    settled: int
    repeats: int
    flaky: bool = Field(description="Passed on some repeats and not on others.")
    runs: list[CaseRepeat]
    logs: list[LogLine]
    logs_truncated: bool

    @classmethod
    def of(cls, detail: CaseDetail) -> CaseReply:
        results = detail.results
        passes = sum(1 for r in results.values() if r.verdict == Verdict.PASS)
        return cls(
            run=detail.run.pk,
            case=detail.case.key,
            position=detail.case.position,
            input=detail.case.input,
            expected=detail.case.expected,
            grader=detail.spec.grader.model_dump(mode="json", exclude_none=True),
            output_kind=detail.spec.output,
            passes=passes,
            settled=len(results),
            repeats=detail.run.repeats,
            flaky=0 < passes < len(results),
            runs=[CaseRepeat.of(detail, repeat) for repeat in detail.repeats],
            logs=[LogLine.of(row) for row in detail.logs[:CASE_LOG_LINES]],
            logs_truncated=len(detail.logs) > CASE_LOG_LINES,
        )
