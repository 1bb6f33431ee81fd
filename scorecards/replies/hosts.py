"""Reply shape of a run by host: per runner and per distinct fingerprint."""

from __future__ import annotations

from pydantic import Field

from core.replies import Reply
from scorecards.selectors.hosts import ByHost, HostGroup


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
