"""Request bodies as JSON, nested within bounds: a body nested too deep is a 400 naming the
bound, never a RecursionError deeper in the stack (a 500)."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from core.jsonbounds import TooDeep, json_depth_within


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser, with nesting bounded."""

    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        try:
            value = super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError(f"JSON parse error - {TooDeep()}") from exc
        if not json_depth_within(value):
            raise ParseError(f"JSON parse error - {TooDeep()}")
        return value
