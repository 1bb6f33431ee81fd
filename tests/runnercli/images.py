"""Small, valid PNG and JPEG files written byte by byte (no imaging library needed)."""

from __future__ import annotations

import os
import struct
import zlib

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _png_chunk(tag: bytes, body: bytes) -> bytes:
    crc = struct.pack(">I", zlib.crc32(tag + body))
    return struct.pack(">I", len(body)) + tag + body + crc


def png(width: int = 2, height: int = 2, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A truecolour PNG of one colour."""
    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        PNG_SIGNATURE
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(rows))
        + _png_chunk(b"IEND", b"")
    )


def noisy_png(min_bytes: int) -> bytes:
    """A PNG of random pixels, stored uncompressed: at least `min_bytes` long."""
    width = 256
    height = min_bytes // (width * 3) + 1
    rows = b"".join(b"\x00" + os.urandom(width * 3) for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        PNG_SIGNATURE
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(rows, 0))
        + _png_chunk(b"IEND", b"")
    )


def _segment(marker: int, body: bytes) -> bytes:
    return bytes([0xFF, marker]) + struct.pack(">H", len(body) + 2) + body


def jpeg(comment: str = "frame") -> bytes:
    """A baseline JPEG: one 8x8 grey block (every coefficient zero), with a comment."""
    one_code = bytes([1] + [0] * 15) + b"\x00"  # a single code of length 1, for symbol 0
    return (
        b"\xff\xd8"
        + _segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")
        + _segment(0xFE, comment.encode())
        + _segment(0xDB, b"\x00" + bytes([1] * 64))
        + _segment(0xC0, b"\x08\x00\x08\x00\x08\x01\x01\x11\x00")
        + _segment(0xC4, b"\x00" + one_code)  # DC table 0: category 0 is "0"
        + _segment(0xC4, b"\x10" + one_code)  # AC table 0: end of block is "0"
        + _segment(0xDA, b"\x01\x01\x00\x00\x3f\x00")
        + b"\x3f"  # DC "0", EOB "0", padded with ones
        + b"\xff\xd9"
    )
