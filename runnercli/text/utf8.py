"""Text cut to a budget of UTF-8 bytes, never inside a character."""

from __future__ import annotations


def clip_utf8(text: str, limit: int, *, keep_tail: bool = False) -> str:
    """Cut `text` to at most `limit` UTF-8 bytes, never splitting a character."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    cut = raw[-limit:] if keep_tail else raw[:limit]
    return cut.decode("utf-8", errors="ignore")


def utf8_cut(data: bytes | bytearray, limit: int) -> int:
    """The largest cut point ≤ limit that does not split a UTF-8 character."""
    if len(data) <= limit:
        return len(data)
    cut = limit
    while cut > limit - 4 and cut > 0 and data[cut] & 0xC0 == 0x80:
        cut -= 1
    return cut if cut > 0 else limit
