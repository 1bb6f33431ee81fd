"""Reply shapes of a run's results as listed: each output cut to a preview."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import Field

from core.replies import Reply
from scorecards.replies.marks import PersonMark
from scorecards.selectors.cursors import cursor_encode
from scorecards.selectors.results import OUTPUT_PREVIEW_BYTES


def _cut(text: str, limit: int) -> str:
    """At most `limit` bytes of UTF-8, never half a character."""
    encoded = text.encode("utf-8")
    if len(encoded) <= limit:
        return text
    return encoded[:limit].decode("utf-8", errors="ignore")


class RunResultItem(Reply):
    """One settled result of a case (one repeat), its output cut to a preview."""

    case: str
    repeat: int
    seq: int = Field(description="Settlement order within the run.")
    verdict: str
    score: float
    status: str
    output: str
    output_truncated: bool = Field(
        description="The output was cut to 1 KiB; the case reply and the exports hold it whole."
    )
    error: str
    reason: str = Field(description="The grader's reason.")
    person: PersonMark | None = Field(
        default=None, description="A person's verdict standing over the grader's."
    )
    duration_ms: int
    usage: dict[str, Any] | None
    provenance: dict[str, Any]
    judged_by: dict[str, Any] | None = Field(
        default=None, description="Who judged a judge-graded case, with what."
    )
    runner: int | None
    tampered: list[dict[str, Any]] | None = Field(
        default=None, description="The protected paths the agent changed (null: none protected)."
    )
    phases: dict[str, Any] | None = Field(
        default=None, description="Seconds in each phase: setup_s, agent_s, verify_s, collect_s."
    )

    @classmethod
    def of(cls, row: Any) -> RunResultItem:
        """One row of `with_previews` as it is listed."""
        head = _cut(row.output_head, OUTPUT_PREVIEW_BYTES)
        return cls(
            case=row.case_key,
            repeat=row.repeat,
            seq=row.seq,
            verdict=row.verdict,
            score=row.score,
            status=row.status,
            output=head,
            output_truncated=len(head) < row.output_chars,
            error=row.error,
            reason=row.reason,
            person=PersonMark.of(row),
            duration_ms=row.duration_ms,
            usage=row.usage,
            provenance=row.provenance,
            judged_by=row.judged_by or None,
            runner=row.runner_id,
            tampered=row.tampered,
            phases=row.phases,
        )


def result_items(rows: Iterable[Any]) -> list[RunResultItem]:
    return [RunResultItem.of(row) for row in rows]


class ResultPage(Reply):
    """A page of a run's results, in settlement order (MCP `list_results`)."""

    results: list[RunResultItem]
    next_cursor: str | None = Field(description="Pass it as `cursor` for the next page.")

    @classmethod
    def of(cls, rows: Iterable[Any], last: int | None) -> ResultPage:
        """The rows of `results_page`, and the cursor past `last` (the seq to continue from)."""
        return cls(results=result_items(rows), next_cursor=cursor_encode(last) if last else None)


class ResultItemPage(Reply):
    """The REST page of results: DRF's cursor pagination."""

    next: str | None
    previous: str | None
    results: list[RunResultItem]
