"""Redaction on the member's machine: `redact` patterns (RE2) in `runner.json`.

Whatever leaves the machine — log lines, `log_tail`, `stderr_tail`, the output, `repo.diff`,
text artifacts, answers to file requests — goes through one Redactor, which replaces each
match with `[redacted]`. RE2 runs in linear time, so a pattern cannot stall the runner on a
large output; the patterns are checked when the Redactor is made, and the first that RE2
cannot run, or that matches the empty string, is named in the error. All patterns run as
one alternation, in one pass over the text.

Binary content (an image, an archive, anything with a NUL byte near its start, as git judges
it) is left alone; text is redacted byte-wise, so a file that is not valid UTF-8 is redacted
too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import re2

REDACT_KEY = "redact"
REDACTED = "[redacted]"
MAX_PATTERNS = 100
# How far into a blob a NUL byte makes it binary (git's own heuristic looks this far).
BINARY_PROBE_BYTES = 8000
_BINARY_FAMILIES = ("image/", "audio/", "video/", "font/")
_BINARY_TYPES = frozenset(
    {
        "application/zip",
        "application/gzip",
        "application/x-gzip",
        "application/x-tar",
        "application/x-bzip2",
        "application/x-xz",
        "application/zstd",
        "application/pdf",
        "application/wasm",
        "application/x-sqlite3",
    }
)


class RedactError(ValueError):
    """A `redact` setting that cannot be used; the message names the pattern."""


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False
    return options


def _compile(index: int, pattern: object) -> Any:
    if not isinstance(pattern, str) or not pattern:
        raise RedactError(f"redact pattern {index} must be a non-empty string, not {pattern!r}")
    try:
        compiled = re2.compile(pattern, _options())
    except re2.error as exc:
        said = exc.args[0] if exc.args else exc
        said = said.decode("utf-8", "replace") if isinstance(said, bytes) else str(said)
        raise RedactError(
            f"redact pattern {index} {pattern!r} is not an RE2 pattern: {said}"
        ) from None
    if compiled.search("") is not None:
        raise RedactError(
            f"redact pattern {index} {pattern!r} matches the empty string, so it would mark "
            "text that holds nothing to hide"
        )
    return compiled


class Redactor:
    """Replaces what the member's patterns match with `[redacted]`."""

    def __init__(self, patterns: Sequence[str] = ()) -> None:
        if isinstance(patterns, str):
            raise RedactError("redact must be a list of patterns")
        if len(patterns) > MAX_PATTERNS:
            raise RedactError(f"redact may list at most {MAX_PATTERNS} patterns")
        each = [_compile(index, pattern) for index, pattern in enumerate(patterns, 1)]
        self.patterns = tuple(patterns)
        # One alternation runs one pass. `\Q` quotes to the end of a pattern, which would
        # swallow the group closing it, so such a set runs pattern by pattern.
        if len(each) > 1 and not any("\\Q" in pattern for pattern in patterns):
            joined = "|".join(f"(?:{pattern})" for pattern in patterns)
            each = [re2.compile(joined, _options())]
        self._regexes = each

    @classmethod
    def of_config(cls, data: dict[str, Any]) -> Redactor:
        """The Redactor of a runner config's JSON data (its `redact` key)."""
        patterns = data.get(REDACT_KEY) or []
        if not isinstance(patterns, list):
            raise RedactError(f'"{REDACT_KEY}" must be a list of RE2 patterns')
        return cls(patterns)

    def __bool__(self) -> bool:
        return bool(self._regexes)

    def text(self, text: str) -> str:
        for regex in self._regexes:
            if regex.search(text) is not None:
                text = regex.sub(_text_mark, text)
        return text

    def lines(self, lines: Sequence[str]) -> list[str]:
        return [self.text(line) for line in lines]

    def redact_bytes(self, data: bytes) -> bytes:
        for regex in self._regexes:
            if regex.search(data) is not None:
                data = regex.sub(_bytes_mark, data)
        return data

    def bytes_if_text(self, data: bytes, media_type: str | None = None) -> bytes:
        """`data` redacted when it is text; binary content is returned as it is."""
        if not self._regexes or is_binary(data, media_type):
            return data
        return self.redact_bytes(data)


def is_binary(data: bytes, media_type: str | None = None) -> bool:
    """Whether content is binary: by its media type when that says so, else a NUL byte
    among its first BINARY_PROBE_BYTES."""
    kind = (media_type or "").split(";")[0].strip().lower()
    if kind.startswith(_BINARY_FAMILIES) and not kind.endswith(("+xml", "+json")):
        return True
    return kind in _BINARY_TYPES or b"\x00" in data[:BINARY_PROBE_BYTES]


# A pattern may still match nothing at a word boundary or a line's end; nothing is marked there.
def _text_mark(match: Any) -> str:
    return REDACTED if match.end() > match.start() else ""


def _bytes_mark(match: Any) -> bytes:
    return REDACTED.encode() if match.end() > match.start() else b""
