"""Patterns the server runs on what members' machines report: RE2 only (linear time, never
backtracking), so no pattern and no output can stall a server process.

A pattern RE2 cannot run (a backreference, a lookaround, an atomic group) is refused when
it is stored, and judged `error` if it was stored before — never run by a backtracking
engine instead.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import re2

from core.jsonbounds import MAX_JSON_DEPTH, loads_bounded

__all__ = ["MAX_JSON_DEPTH", "PatternRefused", "compile_pattern", "parse_json"]
# Expected values longer than this are not taken for patterns when a dataset is checked.
_PATTERN_CHECK_CHARS = 4096

_OPTIONS = re2.Options()
# Refusals are reported to the caller, not printed on the server's stderr.
_OPTIONS.log_errors = False


class PatternRefused(ValueError):
    """RE2 cannot run this pattern; the message names it and says why."""


def _why(exc: Exception) -> str:
    raw = exc.args[0] if exc.args else exc
    return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)


def _shown(pattern: str) -> str:
    return repr(pattern if len(pattern) <= 200 else pattern[:200] + "…")


@functools.lru_cache(maxsize=512)
def compile_pattern(pattern: str) -> Any:
    """The pattern compiled by RE2, or PatternRefused naming it."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        if not _python_accepts(pattern):
            raise PatternRefused(f"invalid regex pattern {_shown(pattern)}: {_why(exc)}") from exc
        raise PatternRefused(
            f"pattern {_shown(pattern)} cannot run under RE2 (linear time: no backreferences, "
            f"lookaround or atomic groups): {_why(exc)}"
        ) from exc


def _python_accepts(pattern: str) -> bool:
    """Whether Python's backtracking `re` would compile it (compiled only, never run)."""
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        return False
    return True


def pattern_refusal(pattern: str) -> str | None:
    """Why RE2 refuses this pattern, or None when it can run it."""
    try:
        compile_pattern(pattern)
    except PatternRefused as exc:
        return str(exc)
    return None


def backtracking_only(text: str) -> str | None:
    """Why `text`, read as a pattern, would run only under a backtracking engine: Python's
    `re` accepts it and RE2 does not. None for anything else — plain text that is no
    pattern at all, a pattern RE2 runs, or a possessive-looking `C++` that is more likely
    text than a pattern."""
    if len(text) > _PATTERN_CHECK_CHARS or not any(c in text for c in "\\(?"):
        return None
    refusal = pattern_refusal(text)
    if refusal is None or "bad repetition operator" in refusal or not _python_accepts(text):
        return None
    return refusal


def parse_json(text: str) -> Any:
    """Parse JSON text nested at most MAX_JSON_DEPTH deep: ValueError otherwise, never a
    RecursionError."""
    return loads_bounded(text, MAX_JSON_DEPTH)
