"""Cursors over ordered rows, in the form DRF's `CursorPagination` writes them.

The REST API pages with DRF's `CursorPagination` (full `next` URLs); MCP hands back the bare
cursor. Both carry the same token, base64 of `p=<position>`, so a cursor taken from one
works on the other.
"""

from __future__ import annotations

from base64 import b64decode, b64encode
from urllib import parse

from core.errors import Invalid
from core.fields import ascii_int


def cursor_encode(position: int) -> str:
    """The cursor of the rows after `position` (forward, no offset)."""
    return b64encode(parse.urlencode({"p": str(position)}).encode("ascii")).decode("ascii")


def cursor_decode(token: str | None) -> int | None:
    """The position a forward cursor names; None for no cursor. Anything else is Invalid."""
    if token is None or token == "":
        return None
    try:
        tokens = parse.parse_qs(b64decode(token.encode("ascii"), validate=True).decode("ascii"))
    except (ValueError, UnicodeError):
        raise Invalid({"cursor": ["Invalid cursor."]}) from None
    position = tokens.get("p", [""])[0]
    backwards = tokens.get("r", ["0"])[0] != "0" or tokens.get("o", ["0"])[0] != "0"
    number = ascii_int(position)
    if backwards or number is None:
        raise Invalid({"cursor": ["Invalid cursor."]})
    return number
