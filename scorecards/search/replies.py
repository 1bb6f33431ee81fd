"""The reply of a search, shared by the REST API, the pages and MCP (`search_runs`)."""

from __future__ import annotations

from pydantic import Field

from core.replies import Reply
from scorecards.links import case_url
from scorecards.search.selectors import Found, Hit, Match


class HitReply(Reply):
    field: str = Field(description="output, reason, error, stderr_tail or trace.")
    snippet: str = Field(
        description="HTML: the text around the match, escaped, the match in <mark>."
    )
    seq: int | None = Field(default=None, description="A trace event's seq.")
    kind: str = Field(default="", description="A trace event's kind.")
    path: str = Field(default="", description="Where in the trace event's data the match is.")

    @classmethod
    def of(cls, hit: Hit) -> HitReply:
        return cls(field=hit.field, snippet=hit.snippet, seq=hit.seq, kind=hit.kind, path=hit.path)


class MatchReply(Reply):
    run: int
    case: str
    repeat: int
    result: int
    verdict: str
    url: str = Field(description="The case's page.")
    hits: list[HitReply]

    @classmethod
    def of(cls, match: Match) -> MatchReply:
        result = match.result
        return cls(
            run=result.run_id,
            case=result.case.key,
            repeat=result.repeat,
            result=result.pk,
            verdict=result.verdict,
            url=case_url(result.run_id, result.case.key),
            hits=[HitReply.of(hit) for hit in match.hits],
        )


class SearchReply(Reply):
    query: str
    workspace: str
    run: int | None
    page: int
    limit: int
    next_page: int | None = Field(description="The next page's number; null on the last.")
    method: str = Field(description="index (trigram) or scan (bounded; see note).")
    note: str = Field(description="Why the search scanned, and how far; empty when indexed.")
    matches: list[MatchReply]

    @classmethod
    def of(cls, found: Found) -> SearchReply:
        return cls(
            query=found.query,
            workspace=found.workspace.slug,
            run=found.run.pk if found.run else None,
            page=found.page,
            limit=found.limit,
            next_page=found.page + 1 if found.has_more else None,
            method=found.method,
            note=found.note,
            matches=[MatchReply.of(match) for match in found.matches],
        )
