"""The literal, case-insensitive substring match: `%`, `_` and `\\` in what was typed match
themselves, nothing in it is an operator."""

from __future__ import annotations

from typing import Any

from django.db.models import Lookup


def like_pattern(text: str) -> str:
    """`%text%` with LIKE's wildcards and its escape character escaped."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


class Contains(Lookup):  # type: ignore[type-arg]
    """`lhs` holds `rhs` (already a LIKE pattern), ignoring case: `ILIKE` on PostgreSQL, which
    a `gin_trgm_ops` index answers; `LIKE` on SQLite, which ignores the case of ASCII."""

    lookup_name = "search_contains"
    prepare_rhs = False

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        # PostgreSQL's LIKE escapes with a backslash unless told otherwise; SQLite's has no
        # escape character unless given one.
        if connection.vendor == "postgresql":
            return f"{lhs} ILIKE {rhs}", [*lhs_params, *rhs_params]
        return f"{lhs} LIKE {rhs} ESCAPE '\\'", [*lhs_params, *rhs_params]
