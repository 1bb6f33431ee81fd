"""Reply shape of a regrade (`POST /api/runs/<id>/regrade`, MCP `regrade_run`)."""

from __future__ import annotations

from pydantic import Field

from core.replies import Reply
from scorecards.replies.runs import RunSummary, VersionRef
from scorecards.services.regrades import Regraded


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
