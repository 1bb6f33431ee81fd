"""Links to one case of a run. A key holds any character but NUL, so it is percent-encoded
whole — `/` too, so that `a/../b` stays one path segment no browser rewrites. The two keys a
browser would still rewrite however they are encoded, `.` and `..`, go in the query string.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote, urlencode

from django.http import HttpResponseBase
from django.urls import path, register_converter
from django.urls.resolvers import URLPattern

DOT_SEGMENTS = (".", "..")


def key_may_exist(key: str) -> bool:
    """Whether a case may have this key: none holds a NUL (datasets refuse one), and
    PostgreSQL cannot even compare a NUL, so a lookup by such a key finds nothing."""
    return "\x00" not in key


class CaseKeyConverter:
    """A case key in a path: anything, slashes and newlines included (decoded by the server)."""

    regex = r"[\s\S]+"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(CaseKeyConverter, "casekey")


def case_path(prefix: str, run_id: int, key: str, *, slash: bool) -> str:
    base = f"{prefix}/runs/{run_id}/cases"
    if key in DOT_SEGMENTS:
        return f"{base}{'/' if slash else ''}?{urlencode({'key': key})}"
    return f"{base}/{quote(key, safe='')}{'/' if slash else ''}"


def case_url(run_id: int, key: str) -> str:
    """The case page: `/runs/<id>/cases/<key>/`."""
    return case_path("", run_id, key, slash=True)


def api_case_url(run_id: int, key: str) -> str:
    """The case in the API: `/api/runs/<id>/cases/<key>`."""
    return case_path("/api", run_id, key, slash=False)


def case_patterns(
    view: Callable[..., HttpResponseBase], name: str, *, slash: bool
) -> list[URLPattern]:
    """`runs/<id>/cases/<key>` and its query form `runs/<id>/cases?key=`, for one view."""
    tail = "/" if slash else ""
    return [
        path(f"runs/<int:run_id>/cases/<casekey:key>{tail}", view, name=name),
        path(f"runs/<int:run_id>/cases{tail}", view, name=f"{name}-by-query"),
    ]
