"""Many ids in one filter, without a placeholder each.

An `IN (%s, %s, …)` of thousands of ids costs more to build, send and parse than the query
costs to run: psycopg splits the query text on every placeholder, each time, and PostgreSQL
plans a list of constants. On PostgreSQL, `AnyOf` sends the ids as one array parameter
(`= ANY(%s)`); elsewhere it is `IN`, and `by_ids` cuts the ids in chunks (SQLite caps the
placeholders of a statement).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import Any, TypeVar

from django.db.models import F, Lookup, Model, QuerySet
from django.db.models.lookups import In

M = TypeVar("M", bound=Model)

# Ids per statement where they go as placeholders (SQLite).
CHUNK = 1000


class AnyOf(Lookup):  # type: ignore[type-arg]
    """`lhs = ANY(ids)` on PostgreSQL with the ids as one `bigint[]`; `lhs IN (ids)`
    elsewhere. Used as an expression: `filter(AnyOf(F("owner_id"), ids))`."""

    prepare_rhs = False

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, list[Any]]:
        if connection.vendor != "postgresql":
            sql, params = In(self.lhs, list(self.rhs)).as_sql(compiler, connection)
            return sql, list(params)
        lhs, lhs_params = self.process_lhs(compiler, connection)
        return f"{lhs} = ANY(%s::bigint[])", [*lhs_params, [int(i) for i in self.rhs]]


def by_ids(queryset: QuerySet[M], field: str, ids: Collection[int]) -> Iterator[QuerySet[M]]:
    """`queryset` narrowed to rows whose `field` is one of `ids`: one queryset on
    PostgreSQL, one per chunk of ids elsewhere."""
    from django.db import connections

    ordered = sorted(ids)
    size = len(ordered) if connections[queryset.db].vendor == "postgresql" else CHUNK
    for start in range(0, len(ordered), size or 1):
        yield queryset.filter(AnyOf(F(field), ordered[start : start + size]))
