"""Reply shapes of verdicts beyond the grader's: a regrade, a person's verdict and its mark,
a result's verdict history, and a run by host."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from core.replies import Reply, Timestamp
from scorecards.models import CaseResult, VerdictEntry
from scorecards.selectors.hosts import ByHost, HostGroup


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


class HostItem(Reply):
    label: str
    facts: dict[str, str] = Field(description="OS, tool versions, repo commit (fingerprints).")
    runners: list[str] = Field(description="The runners that reported this fingerprint.")
    results: int
    passes: int
    pass_rate: float | None
    mean_duration_ms: int | None

    @classmethod
    def of(cls, group: HostGroup) -> HostItem:
        return cls(
            label=group.label,
            facts=group.facts,
            runners=group.runners,
            results=group.results,
            passes=group.passes,
            pass_rate=group.pass_rate,
            mean_duration_ms=group.mean_duration_ms,
        )


class ByHostReply(Reply):
    """Pass rate, count and mean duration per runner and per distinct fingerprint."""

    runners: list[HostItem]
    fingerprints: list[HostItem]

    @classmethod
    def of(cls, by_host: ByHost | None) -> ByHostReply:
        if by_host is None:
            return cls(runners=[], fingerprints=[])
        return cls(
            runners=[HostItem.of(g) for g in by_host.runners],
            fingerprints=[HostItem.of(g) for g in by_host.fingerprints],
        )


class VerdictReply(Reply):
    """One result after a person's verdict was set or withdrawn, and the run's new summary."""

    run: int
    case: str
    repeat: int
    verdict: str
    score: float
    person: PersonMark | None
    summary: dict[str, Any]

    @classmethod
    def of(cls, result: CaseResult, key: str, summary: dict[str, Any]) -> VerdictReply:
        return cls(
            run=result.run_id,
            case=key,
            repeat=result.repeat,
            verdict=result.verdict,
            score=result.score,
            person=PersonMark.of(result),
            summary=summary,
        )
