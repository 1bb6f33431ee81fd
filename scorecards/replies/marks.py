"""Reply shapes of a result's marks beyond the grader's: a person's verdict standing over
it, and each verdict the result had (its history)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from core.replies import Reply, Timestamp
from scorecards.models import VerdictEntry


class PersonMark(Reply):
    """A person's verdict standing over the grader's."""

    by: str
    at: Timestamp | None
    note: str
    grader_verdict: str = Field(description="What the grader says underneath.")

    @classmethod
    def of(cls, row: Any) -> PersonMark | None:
        """The mark of a result row whose `verdict_by_name` was read with it (or its user)."""
        if getattr(row, "verdict_by_id", None) is None:
            return None
        name = getattr(row, "verdict_by_name", None)
        if name is None:
            name = row.verdict_by.get_username() if row.verdict_by else ""
        return cls(
            by=name, at=row.verdict_at, note=row.verdict_note, grader_verdict=row.grader_verdict
        )


class VerdictEntryItem(Reply):
    """One verdict a result had."""

    verdict: str
    score: float
    source: str = Field(description="grader, regrade, person or withdrawn")
    counted: bool = Field(description="Whether it became the verdict that counts.")
    harness: str | None = Field(description="The grader's harness version, e.g. `echo v2`.")
    by: str | None
    note: str
    reason: str
    at: Timestamp

    @classmethod
    def of(cls, entry: VerdictEntry) -> VerdictEntryItem:
        return cls(
            verdict=entry.verdict,
            score=entry.score,
            source=entry.source,
            counted=entry.counted,
            harness=str(entry.harness) if entry.harness_id else None,
            by=entry.by.get_username() if entry.by_id and entry.by else None,
            note=entry.note,
            reason=entry.reason,
            at=entry.at,
        )
