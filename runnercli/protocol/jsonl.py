"""JSON Lines (a dataset's cases, a kept trace, an agent's `--json` stream) split as the
format splits them, on the runner and the server alike."""

from __future__ import annotations


def json_lines(text: str) -> list[str]:
    """The lines of JSON Lines text: split at LF, CRLF or CR only. `str.splitlines` also
    splits at U+0085, U+2028, U+2029 and a few control characters, which a JSON string may
    hold unescaped (pydantic's encoder, JavaScript's and serde's write them raw)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
