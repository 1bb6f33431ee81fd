"""A match in its context: the text around the first match, HTML-escaped, the match wrapped
in `<mark>`; and where in a trace event's JSON the match is."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from django.utils.html import escape

CONTEXT_CHARS = 80


def finder(query: str) -> re.Pattern[str]:
    """The literal query, ignoring case (the simple case folding `ILIKE` and FTS5 use)."""
    return re.compile(re.escape(query), re.IGNORECASE)


def snippet(text: str, pattern: re.Pattern[str]) -> str | None:
    """`…before <mark>match</mark> after…`, escaped; None when the text does not hold it."""
    found = pattern.search(text)
    if found is None:
        return None
    start, end = found.span()
    lo, hi = max(0, start - CONTEXT_CHARS), min(len(text), end + CONTEXT_CHARS)
    before, match, after = text[lo:start], text[start:end], text[end:hi]
    return (
        ("…" if lo else "")
        + escape(before)
        + f"<mark>{escape(match)}</mark>"
        + escape(after)
        + ("…" if hi < len(text) else "")
    )


def _strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for n, item in enumerate(value):
            yield from _strings(item, f"{path}[{n}]")


def event_snippet(data: Any, pattern: re.Pattern[str]) -> tuple[str, str] | None:
    """The first string of a trace event's data holding the match: (its path, the snippet)."""
    for path, text in _strings(data):
        if (found := snippet(text, pattern)) is not None:
            return path, found
    return None
