"""JSON nested within bounds: a value nested too deep is refused (a ValueError naming the
bound), never a RecursionError deeper in the stack. Pure: no Django, no DRF."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

# Deeper than any real request body; what a service, the database adapter or a grader walks
# recursively stays well inside Python's recursion limit below it.
MAX_JSON_DEPTH = 100


def json_depth_within(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a parsed JSON value nests at most `limit` deep (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth > limit:
                return False
            children: Iterator[Any] = iter(node.values() if isinstance(node, dict) else node)
            stack.extend((child, depth + 1) for child in children)
    return True


class TooDeep(ValueError):
    def __init__(self, limit: int = MAX_JSON_DEPTH) -> None:
        super().__init__(f"JSON nested deeper than {limit} levels")


def loads_bounded(text: str | bytes, limit: int = MAX_JSON_DEPTH, **kwargs: Any) -> Any:
    """`json.loads`, refusing (TooDeep, a ValueError) what nests deeper than `limit`."""
    try:
        value = json.loads(text, **kwargs)
    except RecursionError as exc:
        raise TooDeep(limit) from exc
    if not json_depth_within(value, limit):
        raise TooDeep(limit)
    return value
