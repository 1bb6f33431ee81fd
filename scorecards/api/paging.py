"""DRF cursor pagination for runs and results, with bad cursors and limits refused (400)."""

from __future__ import annotations

from base64 import b64decode

from rest_framework.exceptions import NotFound as DrfNotFound
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import Cursor, CursorPagination
from rest_framework.request import Request

from core.fields import ascii_int
from scorecards.selectors.results import MAX_RESULTS_PAGE, RESULTS_PAGE, limit_parse


class StrictCursor(CursorPagination):
    page_size_query_param = "limit"
    max_page_size = MAX_RESULTS_PAGE

    def decode_cursor(self, request: Request) -> Cursor | None:
        # DRF answers a bad cursor with a 404, and one whose position is not a number with
        # a 500 from the filter; both are bad input.
        raw = request.query_params.get(self.cursor_query_param)
        try:
            if raw is not None:
                b64decode(raw.encode("ascii"), validate=True)
            cursor = super().decode_cursor(request)
        except (DrfNotFound, ValueError, UnicodeError):
            raise ValidationError({"cursor": ["Invalid cursor."]}) from None
        position = None if cursor is None else cursor.position
        if position is not None and ascii_int(str(position)) is None:
            raise ValidationError({"cursor": ["Invalid cursor."]})
        return cursor

    def get_page_size(self, request: Request) -> int:
        return limit_parse(request.query_params.get("limit") or self.page_size)


class SettlementOrder(StrictCursor):
    """A run's results in settlement order (`seq`, unique within a run): a page never
    shifts while results keep arriving, since new ones settle after every cursor."""

    ordering = "seq"
    page_size = RESULTS_PAGE


class NewestFirst(StrictCursor):
    """A workspace's runs, newest first."""

    ordering = "-id"
    page_size = 50
