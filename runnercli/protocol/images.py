"""A frame of a case's screen by its bytes, read the same way by both sides: a PNG or a JPEG
by its first bytes (never its name), and whether it is whole (a file cut short, or still
being written, lacks its end marker)."""

from __future__ import annotations

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The IEND chunk: zero length, its type, and its CRC (always the same bytes).
PNG_END = b"\x00\x00\x00\x00IEND\xaeB`\x82"
JPEG_START = b"\xff\xd8\xff"
JPEG_END = b"\xff\xd9"


def media_type(data: bytes) -> str | None:
    """`image/png` or `image/jpeg` by the first bytes, else None."""
    if data.startswith(PNG_SIGNATURE):
        return "image/png"
    if data.startswith(JPEG_START):
        return "image/jpeg"
    return None


def is_whole(data: bytes, kind: str) -> bool:
    """Whether the image has its end marker: a file cut short (or still growing) has not."""
    if kind == "image/png":
        return data.endswith(PNG_END)
    # Some encoders pad after the end marker.
    return data.rstrip(b"\x00").endswith(JPEG_END)
