"""Numbers read from text, ASCII digits only: Python's `int()` also reads other scripts'
digits (an Arabic-Indic one reads as 1) and refuses some that `str.isdigit()` accepts (a
superscript two), so an id or a cursor written that way is a 400 before any lookup — never
a lookup of another id, nor a 500.

`query_int` is the one reader of a number in a query (or a form field): every page, API view
and consumer parameter goes through it."""

from __future__ import annotations

from typing import Any, overload

from rest_framework import serializers

from core.errors import Invalid

# At most 18 digits: every number fits a database id (a signed 64-bit integer).
MAX_DIGITS = 18


def ascii_int(text: str | None) -> int | None:
    """The non-negative integer `text` spells in ASCII digits (at most 18 of them: it must
    fit a database id), or None."""
    if text is None or not text.isascii() or not text.isdigit() or len(text) > MAX_DIGITS:
        return None
    return int(text)


@overload
def query_int(
    name: str, value: str | int | None, *, default: int, lowest: int = 0, highest: int | None = None
) -> int: ...
@overload
def query_int(
    name: str,
    value: str | int | None,
    *,
    default: None = None,
    lowest: int = 0,
    highest: int | None = None,
) -> int | None: ...
def query_int(
    name: str,
    value: str | int | None,
    *,
    default: int | None = None,
    lowest: int = 0,
    highest: int | None = None,
) -> int | None:
    """The integer the parameter `name` spells in ASCII digits, from `lowest` to `highest`;
    `default` when it is absent or empty. Anything else is Invalid: a 400 naming it."""
    if value is None or value == "":
        return default
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    else:
        number = ascii_int(value)
    if number is None or number < lowest or (highest is not None and number > highest):
        raise Invalid({name: [_bounds(lowest, highest)]})
    return number


def _bounds(lowest: int, highest: int | None) -> str:
    if highest is not None:
        return f"Must be an integer from {lowest} to {highest}, in ASCII digits."
    if lowest:
        return f"Must be an integer of at least {lowest}, in ASCII digits."
    return "Must be a non-negative integer, in ASCII digits."


class IntegerField(serializers.IntegerField):
    """DRF's IntegerField, refusing a string with anything but ASCII characters."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, str) and not data.isascii():
            self.fail("invalid")
        return int(super().to_internal_value(data))
