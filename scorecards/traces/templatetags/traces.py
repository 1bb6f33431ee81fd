"""Template tags of a case's trace: its first page, in the case page itself, so that the
timeline shows as the page is parsed (the rest is read from the API as it is scrolled)."""

from __future__ import annotations

from typing import Any

from django import template

from core.errors import NotFound
from scorecards.models import Run
from scorecards.traces.replies import TraceReply
from scorecards.traces.selectors import attempt_of, filmstrip, trace_page

register = template.Library()

FIRST_PAGE = 100


@register.simple_tag
def trace_first_page(run: Run, key: str, repeat: int) -> dict[str, Any] | None:
    """`{% trace_first_page run key repeat as first %}`: the brief first page of the case's
    trace on that repeat (a run the page's viewer may see) and whether it has frames, or
    None when it has no job."""
    try:
        where = attempt_of(run, key, repeat)
    except NotFound:
        return None
    first = TraceReply.of(trace_page(where, limit=FIRST_PAGE), brief=True).data()
    return {**first, "has_frames": bool(filmstrip(where))}
