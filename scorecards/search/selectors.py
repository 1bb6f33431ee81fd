"""Search: the settled results of a run (or of a workspace's runs) whose output, reason,
error, stderr tail or settled attempt's trace holds what was typed, literally and ignoring
case; a page of them, each with its matches in context.

On PostgreSQL `ILIKE` answers through the trigram GIN indexes; on SQLite the FTS5 trigram
tables answer. A query shorter than a trigram (3 characters), or SQLite without the FTS5
tables, falls back to a scan bounded to the newest `SCAN_RESULTS` results, and says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db import connection
from django.db.models import F, Q, QuerySet, TextField
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast

from core.errors import Invalid
from scorecards.models import CaseResult, Run, Workspace
from scorecards.search.lookups import Contains, like_pattern
from scorecards.search.snippets import event_snippet, finder, snippet
from scorecards.selectors.runs import run_get
from scorecards.selectors.workspaces import membership_for
from scorecards.traces.models import TraceEvent

if TYPE_CHECKING:
    from django.contrib.auth.models import User

MAX_QUERY_CHARS = 500
PAGE = 20
MAX_PAGE = 100
SCAN_RESULTS = 5000
EVENTS_PER_RESULT = 3
RESULT_FIELDS = ("output", "reason", "error", "stderr_tail")
TRIGRAM = 3
FTS_OBJECTS = {
    f"{fts}{suffix}"
    for fts in ("search_caseresult_fts", "search_traceevent_fts")
    for suffix in ("", "_ai", "_ad", "_au")
}

INDEXED = "index"
SCAN = "scan"


def search_query(text: str | None) -> str:
    """What was typed, as searched: refused (Invalid, a 400) when empty, longer than
    `MAX_QUERY_CHARS`, or holding a NUL (no stored text can)."""
    if text is None or not text.strip():
        raise Invalid({"q": ["Type something to search for."]})
    if len(text) > MAX_QUERY_CHARS:
        raise Invalid({"q": [f"At most {MAX_QUERY_CHARS} characters ({len(text)} given)."]})
    if "\x00" in text:
        raise Invalid({"q": ["A NUL character cannot be searched for."]})
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate, as JSON can spell one
        raise Invalid({"q": ["The text is not valid Unicode."]}) from None
    return text


@dataclass
class Hit:
    field: str
    snippet: str
    seq: int | None = None
    kind: str = ""
    path: str = ""


@dataclass
class Match:
    result: CaseResult
    hits: list[Hit] = field(default_factory=list)


@dataclass
class Found:
    query: str
    workspace: Workspace
    run: Run | None
    matches: list[Match]
    page: int
    limit: int
    has_more: bool
    method: str
    note: str


def _needles(query: str) -> list[str]:
    """The query, and as it reads inside stored JSON (quotes, backslashes and control
    characters escaped) when that differs: a trace event's text is its JSON."""
    escaped = json.dumps(query)[1:-1]
    return [query] if escaped == query else [query, escaped]


def _fts_ready() -> bool:
    """SQLite's FTS5 tables and every trigger keeping them are there (a table rebuilt by a
    later schema change loses its triggers: search must then not trust the index)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM sqlite_master WHERE name LIKE 'search\\_%\\_fts%' ESCAPE '\\'"
        )
        return {row[0] for row in cursor.fetchall()} >= FTS_OBJECTS


def _fts_phrase(needles: list[str]) -> str:
    return " OR ".join('"' + needle.replace('"', '""') + '"' for needle in needles)


def _method(query: str) -> str:
    if len(query) < TRIGRAM:
        return SCAN
    if connection.vendor == "postgresql" or (connection.vendor == "sqlite" and _fts_ready()):
        return INDEXED
    return SCAN


def _any(lhs: Any, needles: list[str]) -> Q:
    q = Q()
    for needle in needles:
        q |= Q(Contains(lhs, like_pattern(needle)))
    return q


def _text_match(query: str, method: str) -> Q:
    if method == INDEXED and connection.vendor == "sqlite":
        fts = "SELECT rowid FROM search_caseresult_fts WHERE search_caseresult_fts MATCH %s"
        return Q(pk__in=RawSQL(fts, [_fts_phrase([query])]))
    q = Q()
    for name in RESULT_FIELDS:
        q |= Q(Contains(F(name), like_pattern(query)))
    return q


def _events(query: str, method: str) -> QuerySet[TraceEvent]:
    needles = _needles(query)
    if method == INDEXED and connection.vendor == "sqlite":
        fts = "SELECT rowid FROM search_traceevent_fts WHERE search_traceevent_fts MATCH %s"
        return TraceEvent.objects.filter(pk__in=RawSQL(fts, [_fts_phrase(needles)]))
    # The expression the GIN index is built on: `data::text`.
    return TraceEvent.objects.filter(_any(Cast("data", TextField()), needles))


def _scope(workspace: Workspace, run: Run | None, method: str) -> QuerySet[CaseResult]:
    results = (
        CaseResult.objects.filter(run=run)
        if run
        else CaseResult.objects.filter(run__workspace=workspace)
    )
    if method == SCAN:
        newest = results.order_by("-run_id", "-seq").values_list("pk", flat=True)[:SCAN_RESULTS]
        results = CaseResult.objects.filter(pk__in=list(newest))
    return results


def _hits(matches: list[Match], query: str, method: str) -> None:
    pattern = finder(query)
    for match in matches:
        for name in RESULT_FIELDS:
            if (found := snippet(getattr(match.result, name) or "", pattern)) is not None:
                match.hits.append(Hit(field=name, snippet=found))
    by_attempt = {m.result.attempt_id: m for m in matches if m.result.attempt_id}
    events = (
        _events(query, method)
        .filter(attempt_id__in=list(by_attempt))
        .order_by("attempt_id", "seq")
        .values_list("attempt_id", "seq", "kind", "data")
    )
    for attempt_id, seq, kind, data in events.iterator(chunk_size=500):
        match = by_attempt[attempt_id]
        if sum(h.field == "trace" for h in match.hits) >= EVENTS_PER_RESULT:
            continue
        path, text = event_snippet(data, pattern) or ("", snippet(json.dumps(data), pattern) or "")
        match.hits.append(Hit(field="trace", snippet=text, seq=seq, kind=kind, path=path))


def search_scope(
    *, user: User, run_id: int | None = None, workspace_slug: str | None = None
) -> tuple[Workspace, Run | None]:
    """The workspace searched, and the run when one is: NotFound for anyone not a member."""
    if run_id is not None:
        run = run_get(user=user, run_id=run_id)
        return run.workspace, run
    return membership_for(user=user, slug=workspace_slug or "").workspace, None


def search_results(
    *,
    user: User,
    query: str | None,
    run_id: int | None = None,
    workspace_slug: str | None = None,
    page: int = 1,
    limit: int = PAGE,
) -> Found:
    """The results of the run (or the workspace's runs) the user may see whose text or settled
    trace holds `query`, literally and ignoring case, newest run first, then case order;
    outsiders get NotFound, a bad query Invalid."""
    workspace, run = search_scope(user=user, run_id=run_id, workspace_slug=workspace_slug)
    query = search_query(query)
    method = _method(query)
    results = _scope(workspace, run, method)
    traced = _events(query, method)
    if method == SCAN:
        # Bounded: only the events of the scope's settled attempts are read. Through the
        # index, the few matching events are found first and the results they settled
        # checked against the scope after.
        traced = traced.filter(attempt_id__in=results.values("attempt_id"))
    traced_attempts = traced.values("attempt_id")
    found = (
        results.filter(_text_match(query, method) | Q(attempt_id__in=traced_attempts))
        .select_related("case", "run")
        .order_by("-run_id", "case__position", "repeat")
    )
    start = (page - 1) * limit
    rows = list(found[start : start + limit + 1])
    matches = [Match(result) for result in rows[:limit]]
    _hits(matches, query, method)
    note = ""
    if method == SCAN:
        why = "shorter than 3 characters" if len(query) < TRIGRAM else "no trigram index here"
        note = f"Scanned the newest {SCAN_RESULTS} results only ({why})."
    return Found(query, workspace, run, matches, page, limit, len(rows) > limit, method, note)
