"""Reply shapes of one case of a run (`GET /api/runs/<id>/cases/<key>`, the case page): what
went in, what was expected, what came out on each repeat, why it was judged so, and every
attempt behind it."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from core.replies import Reply, Timestamp
from scorecards.replies import LogLine


class DiffLine(Reply):
    op: str = Field(description="' ' both, '-' only expected, '+' only output.")
    text: str


class ShadowItem(Reply):
    """A late result the fence refused, kept on its attempt: never counted."""

    at: Timestamp | None
    reason: str
    status: str
    would: str = Field(description="The verdict it would have had: pass, fail or error.")
    output: str


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
    runner: int | None
    settled_at: Timestamp


class CaseRepeat(Reply):
    repeat: int
    job_status: str | None = Field(description="The queue's state of this repeat's job.")
    result: CaseRunResult | None
    attempts: list[AttemptItem]


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
