"""What the runner prints of what the server sent: made harmless for the member's terminal.

A case key, a harness name, a reason or a label is the server's text; printed raw, an escape
sequence in it could erase the line above (`\\x1b[2K`), retitle the window, fake a "completed"
line or hide what is about to run. `clean` replaces every control character — C0 and C1,
DEL, and the Unicode controls that reorder or break lines — by a visible escape such as
`\\x1b`, so the text reads as it was sent and does nothing.
"""

from __future__ import annotations

import unicodedata

# Characters outside the Cc category that still move text around: bidirectional overrides
# and isolates (they can show `rm -rf` as something else), line and paragraph separators.
_REORDERING = frozenset(
    "\u061c\u200e\u200f\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


def _visible(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def clean(text: object) -> str:
    """Return `text` with every control character replaced by a visible escape (one line)."""
    value = str(text)
    if value.isprintable():
        return value
    return "".join(
        _visible(char) if unicodedata.category(char) == "Cc" or char in _REORDERING else char
        for char in value
    )


def quote_arg(arg: str) -> str:
    """One argv element in single quotes, shell style, whatever it holds, and made harmless."""
    return "'" + clean(arg).replace("'", "'\"'\"'") + "'"


def quote_argv(argv: list[str]) -> str:
    """Every element quoted, so where one ends and the next begins is never in doubt."""
    return " ".join(quote_arg(arg) for arg in argv)
