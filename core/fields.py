"""Numbers read from text, ASCII digits only: Python's `int()` also reads other scripts'
digits (an Arabic-Indic one reads as 1) and refuses some that `str.isdigit()` accepts (a
superscript two), so an id or a cursor written that way is a 400 before any lookup — never
a lookup of another id, nor a 500."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


def ascii_int(text: str | None) -> int | None:
    """The non-negative integer `text` spells in ASCII digits (at most 18 of them: it must
    fit a database id), or None."""
    if text is None or not text.isascii() or not text.isdigit() or len(text) > 18:
        return None
    return int(text)


class IntegerField(serializers.IntegerField):
    """DRF's IntegerField, refusing a string with anything but ASCII characters."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, str) and not data.isascii():
            self.fail("invalid")
        return int(super().to_internal_value(data))
