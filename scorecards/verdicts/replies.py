"""Reply shapes of a regrade (`POST /api/runs/<id>/regrade`, MCP `regrade_run`) and of a
person's verdict (`PUT`/`DELETE /api/runs/<id>/verdict`, MCP `set_verdict`)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from core.replies import Reply
from scorecards.models import CaseResult
from scorecards.replies.marks import PersonMark
from scorecards.replies.runs import RunSummary, VersionRef
from scorecards.verdicts.regrades import Regraded


class RegradeReply(Reply):
    """A run's stored outputs scored again: how many, how many changed, the new summary."""

    run: int
    status: str
    grader: VersionRef = Field(description="The harness version whose grader scored them.")
    regraded: int = Field(description="Completed results scored again.")
    changed: int = Field(description="Results whose verdict or score changed.")
    kept: int = Field(description="Results where a person's verdict stands over the grader's.")
    summary: RunSummary

    @classmethod
    def of(cls, done: Regraded) -> RegradeReply:
        return cls(
            run=done.run.pk,
            status=done.run.status,
            grader=VersionRef.of(done.grader),
            regraded=done.regraded,
            changed=done.changed,
            kept=done.kept,
            summary=RunSummary.model_validate(done.summary),
        )


class VerdictReply(Reply):
    """One result after a person's verdict was set or withdrawn, and the run's new summary."""

    run: int
    case: str
    repeat: int
    verdict: str
    score: float
    person: PersonMark | None
    summary: RunSummary

    @classmethod
    def of(cls, result: CaseResult, key: str, summary: dict[str, Any]) -> VerdictReply:
        return cls(
            run=result.run_id,
            case=key,
            repeat=result.repeat,
            verdict=result.verdict,
            score=result.score,
            person=PersonMark.of(result),
            summary=RunSummary.model_validate(summary),
        )
