"""The rows a run's start writes, by statements built once per process (`core.prebuilt`):
the run (with its cases read in the same statement on PostgreSQL, and a small dispatch's
jobs parked by it) and its first events.

A run start is one of the API's hottest writes; compiling its inserts as querysets on every
request cost more than running them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import cache
from typing import Any

from django.db import connections

from core import prebuilt
from runners.queue import ParkWithRun
from scorecards.models import TEXT_CHARS, Case, Run, RunEvent

CaseRow = tuple[str, Any, Any]  # key, input, hidden files
_CASE = ("key", "input", "hidden_files")


@cache
def _cases_sql(alias: str, keyed: bool, said: bool = False) -> str:
    """The dataset's cases in order (only the keys given, when `keyed`), from the run `r`
    inserted by the statement's first part on PostgreSQL, and the run's first events (their
    levels and messages as two arrays) inserted with it, their ids read back in order, when
    `said`."""
    vendor = connections[alias].vendor

    def col(name: str) -> str:
        return f"c.{prebuilt.column(Case, name, alias)}"

    selected = ", ".join(col(name) for name in _CASE)
    narrowed = ""
    if keyed:
        narrowed = f" AND {col('key')} = ANY(%s)" if vendor == "postgresql" else " AND {keys}"
    cases = f"{prebuilt.table(Case, alias)} c"
    order = f" ORDER BY {col('position')}"
    if vendor != "postgresql":
        return f"SELECT {selected} FROM {cases} WHERE {col('dataset_id')} = %s{narrowed}{order}"
    pk = prebuilt.column(Run, "id", alias)
    events, ids = "", ""
    if said:
        events, ids = f", {_events_cte(alias)}", f", {_EVENT_IDS}"
    return (
        f"WITH r AS ({prebuilt.insert_sql(Run, alias)}){events} "
        f"SELECT r.{pk}{ids}, {selected} FROM r "
        f"LEFT JOIN {cases} ON {col('dataset_id')} = %s{narrowed}{order}"
    )


def run_insert_reading_cases(
    run: Run, case_keys: Sequence[str] | None, said: Sequence[tuple[str, str]] = (), at: Any = None
) -> tuple[list[CaseRow], list[RunEvent]]:
    """Insert `run` (setting its pk) with its first events `said` at `at` ((level, message)
    pairs, in order), and read its dataset's cases in order, only those named by
    `case_keys` when given: one statement on PostgreSQL, three on SQLite (two when nothing
    is said)."""
    alias = Run.objects.db
    connection = connections[alias]
    keyed = case_keys is not None
    sql = _cases_sql(alias, keyed, bool(said))
    params: list[Any] = [run.dataset_id]
    if keyed and connection.vendor == "postgresql":
        params.append(list(case_keys or ()))
    elif keyed:
        keys = list(case_keys or ())
        # `IN ()` is not SQL: no key matches no case.
        key = f"c.{prebuilt.column(Case, 'key', alias)}"
        sql = sql.replace("{keys}", f"{key} IN ({', '.join(['%s'] * len(keys))})" if keys else "0")
        params += keys
    reader = prebuilt.columns(Case, alias, _CASE)
    if connection.vendor != "postgresql":
        prebuilt.insert(run, alias)
        events = run_events_insert(run, said, at) if said else []
        with prebuilt.cursor(alias) as cursor:
            cursor.execute(sql, params)
            rows = [tuple(reader.values(alias, row)) for row in cursor.fetchall()]
        return rows, events  # type: ignore[return-value]
    events = _events(run, said, at)
    if said:
        params = _events_params(events, at, alias) + params
    with prebuilt.cursor(alias) as cursor:
        cursor.execute(sql, prebuilt.insert_params(run, alias) + params)
        found = cursor.fetchall()
    run.pk = found[0][0]
    run._state.adding, run._state.db = False, alias
    skip = 1
    if said:
        _stored(events, found[0][1], alias)
        skip = 2
    cases = [tuple(reader.values(alias, row[skip:])) for row in found if row[skip] is not None]
    return cases, events  # type: ignore[return-value]


# The ids of the events the CTE `e` inserted, in order.
_EVENT_IDS = "(SELECT array_agg(e.id ORDER BY e.id) FROM e)"


@cache
def _events_cte(alias: str) -> str:
    """The CTE `e`: the run `r`'s first events at one time, from their levels and messages as
    two arrays, inserted in order (PostgreSQL; `_events_params` are its values)."""
    columns = ", ".join(
        prebuilt.column(RunEvent, name, alias) for name in ("run_id", "at", "level", "message")
    )
    return (
        f"e AS (INSERT INTO {prebuilt.table(RunEvent, alias)} ({columns}) "
        f"SELECT r.{prebuilt.column(Run, 'id', alias)}, %s::timestamptz, v.level, v.message "
        "FROM r, unnest(%s::text[], %s::text[]) WITH ORDINALITY AS v(level, message, n) "
        f"ORDER BY v.n RETURNING {prebuilt.column(RunEvent, 'id', alias)} AS id)"
    )


def _events_params(events: list[RunEvent], at: Any, alias: str) -> list[Any]:
    at = RunEvent._meta.get_field("at").get_db_prep_save(at, connections[alias])
    return [at, [e.level for e in events], [e.message for e in events]]


@cache
def _parking_sql(alias: str, park: str, parked: str) -> str:
    """The run, its first events, its cases read and its jobs parked from them by the queue's
    CTEs `park` (their count and wake-up `parked`): one statement (PostgreSQL)."""

    def col(name: str) -> str:
        return f"c.{prebuilt.column(Case, name, alias)}"

    return (
        f"WITH r AS ({prebuilt.insert_sql(Run, alias)}), {_events_cte(alias)}, "
        f"cases AS (SELECT {col('key')} AS case_key, {col('input')} AS case_input, "
        f"{col('hidden_files')} AS hidden, "
        f"row_number() OVER (ORDER BY {col('position')}) - 1 AS n, count(*) OVER () AS total "
        f"FROM {prebuilt.table(Case, alias)} c WHERE {col('dataset_id')} = %s), {park} "
        f"SELECT r.{prebuilt.column(Run, 'id', alias)}, {_EVENT_IDS}, {parked} FROM r"
    )


def run_insert_parking_jobs(
    run: Run, said: Sequence[tuple[str, str]], at: Any, park: ParkWithRun
) -> tuple[int, list[RunEvent]]:
    """Insert `run` (setting its pk) with its first events `said` at `at`, and park a job per
    case of its dataset and repeat as `park` says: one statement (PostgreSQL). The jobs
    parked, and the events."""
    alias = Run.objects.db
    events = _events(run, said, at)
    params = prebuilt.insert_params(run, alias) + _events_params(events, at, alias)
    params.append(run.dataset_id)
    with prebuilt.cursor(alias) as cursor:
        cursor.execute(_parking_sql(alias, park.sql, park.columns), params + park.params)
        pk, event_pks, count, _ = cursor.fetchone()
    run.pk = pk
    run._state.adding, run._state.db = False, alias
    _stored(events, event_pks or [], alias)
    return park.parked(count), events


@cache
def _events_sql(alias: str, count: int) -> str:
    names = ("run_id", "at", "level", "message")
    columns = ", ".join(prebuilt.column(RunEvent, name, alias) for name in names)
    values = ", ".join(["(%s, %s, %s, %s)"] * count)
    pk = prebuilt.column(RunEvent, "id", alias)
    return (
        f"INSERT INTO {prebuilt.table(RunEvent, alias)} ({columns}) VALUES {values} RETURNING {pk}"
    )


def run_events_insert(run: Run, said: Sequence[tuple[str, str]], at: datetime) -> list[RunEvent]:
    """Record a run's first events at once, in order: (level, message) pairs, one statement."""
    alias = RunEvent.objects.db
    connection = connections[alias]
    events = _events(run, said, at)
    field = RunEvent._meta.get_field("at")
    params: list[Any] = []
    for e in events:
        params += [run.pk, field.get_db_prep_save(e.at, connection), e.level, e.message]
    with prebuilt.cursor(alias) as cursor:
        cursor.execute(_events_sql(alias, len(events)), params)
        _stored(events, [pk for (pk,) in cursor.fetchall()], alias)
    return events


def _events(run: Run, said: Sequence[tuple[str, str]], at: Any) -> list[RunEvent]:
    return [
        RunEvent(run=run, at=at, level=level, message=message[:TEXT_CHARS])
        for level, message in said
    ]


def _stored(events: list[RunEvent], pks: Sequence[int], alias: str) -> None:
    for e, pk in zip(events, pks, strict=True):
        e.pk = pk
        e._state.adding, e._state.db = False, alias
