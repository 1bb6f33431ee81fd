"""Statements built once per process from the models' own metadata, for the hottest paths.

Compiling a queryset costs several times the indexed statement it runs. Where a request
runs the same few statements every time (an API key's lookup, a run's start), their SQL is
written here once, with the tables' and columns' names taken from `_meta`, and executed
through `cursor()`, which on PostgreSQL keeps each prepared on its connection; the rows come
back as model instances through the fields' own converters, as the ORM would build them, and
the values go in through the fields' own preparation.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import Any, TypeVar

from django.conf import settings
from django.db import connections, models, transaction

M = TypeVar("M", bound=models.Model)
_Converter = Callable[[Any, Any, Any], Any]


@dataclass(frozen=True)
class Columns:
    """A model's concrete columns (or some of them): what to select and how to read them."""

    model: type[models.Model]
    names: list[str]
    converters: list[tuple[Any, list[_Converter]]]

    def values(self, alias: str, row: Sequence[Any]) -> list[Any]:
        connection = connections[alias]
        converted = list(row)
        for i, (column, convert) in enumerate(self.converters):
            for converter in convert:
                converted[i] = converter(converted[i], column, connection)
        return converted

    def instance(self, alias: str, row: Sequence[Any]) -> Any:
        """The model instance of these columns' values (the others deferred)."""
        return self.model.from_db(alias, self.names, self.values(alias, row))

    def select(self, table_alias: str, alias: str) -> list[str]:
        """`alias.column` of each, quoted, in order."""
        quote = connections[alias].ops.quote_name
        columns = {f.attname: f.column for f in self.model._meta.concrete_fields}
        return [f"{table_alias}.{quote(columns[name])}" for name in self.names]


@cache
def columns(model: type[models.Model], alias: str, only: tuple[str, ...] = ()) -> Columns:
    """The model's concrete columns (their attnames), or just `only`, with their converters."""
    connection = connections[alias]
    fields = [f for f in model._meta.concrete_fields if not only or f.attname in only]
    if only:
        fields.sort(key=lambda f: only.index(f.attname))
    cols = [field.get_col(model._meta.db_table) for field in fields]
    return Columns(
        model=model,
        names=[field.attname for field in fields],
        converters=[
            (col, connection.ops.get_db_converters(col) + col.get_db_converters(connection))
            for col in cols
        ],
    )


def cursor(alias: str) -> Any:
    """A cursor for the statements written here. On PostgreSQL the server binds their
    parameters and, from a statement's second run on a connection, keeps it prepared: later
    runs skip parsing and planning it, which costs more than running an indexed statement.
    Elsewhere, or with `EVERDICT_DB_PREPARE` off, the connection's usual cursor.

    A statement for it names the type of a parameter the server cannot infer from where it
    stands (`CAST(%s AS integer) IS NULL`), as a prepared statement must."""
    connection = connections[alias]
    if connection.vendor != "postgresql" or not settings.EVERDICT_DB_PREPARE:
        return connection.cursor()
    preparing, logged = _preparing_cursors()
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        raw = preparing(connection.connection)
    connection.validate_thread_sharing()
    return logged(raw, connection) if connection.queries_logged else connection.make_cursor(raw)


def generic_plan(alias: str, sql: str, params: Sequence[Any]) -> str:
    """PostgreSQL's plan for a statement written here as a connection that prepared it may
    keep it: made once for any parameters (`plan_cache_mode = force_generic_plan`), on the
    statistics the tables have now. For tests: a statement of a hot path must be read
    through the right index whatever its parameters and however stale the statistics."""
    count = iter(range(1, len(params) + 1))
    numbered = re.sub(r"%s", lambda _: f"${next(count)}", sql)
    marks = ", ".join(["%s"] * len(params))
    connection = connections[alias]
    with transaction.atomic(using=alias), connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE everdict_generic_plan AS {numbered}")
        try:
            cursor.execute(f"EXPLAIN EXECUTE everdict_generic_plan({marks})", list(params))
            return "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("DEALLOCATE everdict_generic_plan")


# Distinct statement texts whose conversion a process keeps: every statement written here,
# `insert_many`'s one per row count among them, with room to spare.
_CONVERTED_STATEMENTS = 1024


def _query_class() -> type:
    """How the preparing cursor converts a statement's text for the server.

    Psycopg converts a text (its `%s` found and numbered) once per process only when it has
    at most 50 parameters and 4 KiB: ORMs make texts that never come back. The texts written
    here always do (a batch's insert of 8 result rows has 240 parameters), so each is
    converted once, whatever its size, by psycopg's own conversion. That is a private
    function: on a psycopg without it, psycopg's own class (which
    `tests/everdict/test_prepared_statements.py` notices)."""
    from psycopg import _queries

    nocache = getattr(_queries, "_query2pg_nocache", None)
    if nocache is None:
        return _queries.PostgresQuery
    kept = lru_cache(maxsize=_CONVERTED_STATEMENTS)(nocache)

    class Converted(_queries.PostgresQuery):
        convert_text = staticmethod(kept)

        def convert(self, query: Any, vars: Any) -> None:
            if vars is None or not isinstance(query, str | bytes):
                super().convert(query, vars)
                return
            self.query, self._want_formats, self._order, self._parts = self.convert_text(
                self._ensure_bytes(query), self._tx.encoding
            )
            self.dump(vars)

    return Converted


@cache
def _preparing_cursors() -> tuple[type, type]:
    import psycopg
    from django.db.backends.postgresql.base import (  # type: ignore[attr-defined]
        ServerBindingCursor,
    )
    from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
    from psycopg.pq import TransactionStatus

    class Preparing(ServerBindingCursor):  # type: ignore[misc,valid-type]
        """Binds on the server and prepares what runs again (the connection's threshold).

        A migration that changes the type of a column a prepared statement returns (a
        `max_length` widened) makes PostgreSQL refuse that statement on every connection
        that prepared it ("cached plan must not change result type"). Outside a transaction
        the connection's prepared statements are dropped and the statement runs again; in
        one, the refusal stands and the transaction's rollback drops them (psycopg does)."""

        _query_cls = _query_class()

        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            try:
                return super().execute(query, params, **kwargs)
            except psycopg.errors.FeatureNotSupported as exc:
                idle = self.connection.info.transaction_status == TransactionStatus.IDLE
                if "cached plan must not change result type" not in str(exc) or not idle:
                    raise
            # Psycopg forgets its prepared statements as it sees this one go through.
            self.connection.execute("DEALLOCATE ALL")
            return super().execute(query, params, **kwargs)

    class Logged(CursorDebugWrapper):
        """Django's query log (DEBUG, tests counting statements) of a preparing cursor: the
        statement with its values, as the client would have sent it (a prepared run leaves
        psycopg no query text to show)."""

        def execute(self, sql: Any, params: Any = None) -> Any:
            shown = self.db.ops.compose_sql(sql, params) if params else sql
            with self.debug_sql(shown):
                return CursorWrapper.execute(self, sql, params)

    return Preparing, Logged


def table(model: type[models.Model], alias: str) -> str:
    return str(connections[alias].ops.quote_name(model._meta.db_table))


@cache
def select_from(model: type[models.Model], alias: str, name: str) -> str:
    """`SELECT` of every column of the model's table (in `columns` order, read back with
    `columns(model, alias).instance`) `FROM` it, the table aliased `name`; written once per
    process."""
    selected = ", ".join(columns(model, alias).select(name, alias))
    return f"SELECT {selected} FROM {table(model, alias)} {name}"


def column(model: type[models.Model], attname: str, alias: str) -> str:
    """The quoted column of a field, by its attname (`user_id`) or name (`user`)."""
    field = next(f for f in model._meta.concrete_fields if attname in (f.attname, f.name))
    return str(connections[alias].ops.quote_name(field.column))


@cache
def _insert_sql(
    model: type[models.Model], alias: str
) -> tuple[str, tuple[models.Field[Any, Any], ...]]:
    quote = connections[alias].ops.quote_name
    fields = tuple(f for f in model._meta.concrete_fields if not f.primary_key)
    names = ", ".join(quote(f.column) for f in fields)
    marks = ", ".join(["%s"] * len(fields))
    pk = quote(model._meta.pk.column)
    return f"INSERT INTO {table(model, alias)} ({names}) VALUES ({marks}) RETURNING {pk}", fields


def insert_sql(model: type[models.Model], alias: str) -> str:
    """`INSERT INTO … VALUES (%s, …) RETURNING pk` of every concrete field but the pk."""
    return _insert_sql(model, alias)[0]


def insert_params(obj: models.Model, alias: str) -> list[Any]:
    """The values `insert_sql` takes for `obj`, prepared by its fields as `save()` would."""
    connection = connections[alias]
    _, fields = _insert_sql(type(obj), alias)
    return [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]


def insert(obj: M, alias: str) -> M:
    """Insert `obj` in one statement and set its pk; it is then as `objects.create` left it."""
    with cursor(alias) as c:
        c.execute(insert_sql(type(obj), alias), insert_params(obj, alias))
        obj.pk = c.fetchone()[0]
    obj._state.adding = False
    obj._state.db = alias
    return obj


@cache
def _insert_many_sql(model: type[models.Model], alias: str, count: int) -> str:
    quote = connections[alias].ops.quote_name
    _, fields = _insert_sql(model, alias)
    names = ", ".join(quote(f.column) for f in fields)
    row = "(" + ", ".join(["%s"] * len(fields)) + ")"
    pk = quote(model._meta.pk.column)
    rows = ", ".join([row] * count)
    return f"INSERT INTO {table(model, alias)} ({names}) VALUES {rows} RETURNING {pk}"


# Rows per statement of `insert_many`: well under either engine's limit on parameters.
_INSERT_MANY_ROWS = 100


def insert_many(objs: Sequence[M], alias: str) -> list[M]:
    """Insert `objs` (of one model) and set their pks, as `bulk_create` does on a database
    that returns them, without compiling a queryset: one statement per 100 rows, each built
    once per process and row count."""
    for start in range(0, len(objs), _INSERT_MANY_ROWS):
        chunk = objs[start : start + _INSERT_MANY_ROWS]
        params = [value for obj in chunk for value in insert_params(obj, alias)]
        with cursor(alias) as c:
            c.execute(_insert_many_sql(type(chunk[0]), alias, len(chunk)), params)
            pks = [row[0] for row in c.fetchall()]
        for obj, pk in zip(chunk, pks, strict=True):
            obj.pk = pk
            obj._state.adding = False
            obj._state.db = alias
    return list(objs)


@dataclass(frozen=True)
class WithParent:
    """One statement reading a row and the row its foreign key names, as
    `objects.select_related(fk).filter(…)` would, built once (`with_parent`)."""

    sql: str
    row: Columns
    parent: Columns
    fk: str

    def get(self, alias: str, params: Sequence[Any]) -> Any | None:
        """The first row found (its parent set on it), or None."""
        found = self.fetch(alias, params)
        return None if found is None else self.build(alias, found)

    def fetch(self, alias: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
        """The first row found, as the database returned it (`build` makes it instances)."""
        with cursor(alias) as c:
            c.execute(self.sql, list(params))
            found: tuple[Any, ...] | None = c.fetchone()
        return found

    def build(self, alias: str, found: Sequence[Any]) -> Any:
        """The instance of a row `fetch` returned, its parent set on it (new ones each call)."""
        split = len(self.row.names)
        obj = self.row.instance(alias, found[:split])
        setattr(obj, self.fk, self.parent.instance(alias, found[split:]))
        return obj


@cache
def with_parent(
    model: type[models.Model], fk: str, alias: str, equal: tuple[str, ...], null: tuple[str, ...]
) -> WithParent:
    """The statement reading a `model` row whose fields `equal` are the parameters given (in
    order) and `null` are NULL, with the row its foreign key `fk` points to."""
    quote = connections[alias].ops.quote_name
    field = model._meta.get_field(fk)
    parent_model = field.related_model
    assert isinstance(parent_model, type) and issubclass(parent_model, models.Model)
    row, parent = columns(model, alias), columns(parent_model, alias)
    selected = ", ".join(row.select("r", alias) + parent.select("p", alias))
    parent_pk = quote(parent_model._meta.pk.column)
    conditions = [f"r.{column(model, name, alias)} = %s" for name in equal]
    conditions += [f"r.{column(model, name, alias)} IS NULL" for name in null]
    sql = (
        f"SELECT {selected} FROM {table(model, alias)} r "
        f"JOIN {table(parent_model, alias)} p ON p.{parent_pk} = r.{column(model, fk, alias)} "
        f"WHERE {' AND '.join(conditions)}"
    )
    return WithParent(sql=sql, row=row, parent=parent, fk=fk)
