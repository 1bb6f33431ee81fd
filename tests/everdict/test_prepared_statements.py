"""On PostgreSQL the hot paths' own statements (`core.prebuilt.cursor`) are prepared on their
connection from their second run, and a migration that changes a column they return does
not leave them refused."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from django.db import DatabaseError, connection, transaction
from django.test import override_settings

from accounts.services import api_key_authenticate, api_key_create
from tests.suites import pair, start, suite

pytestmark = pytest.mark.postgres_only


def _prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def _is_start_read(statement: str) -> bool:
    return "FOR UPDATE OF w" in statement and "scorecards_membership" in statement


@pytest.fixture
def postgres() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements are PostgreSQL's")


@pytest.mark.django_db
def test_a_run_start_prepares_its_read_on_its_second_run(
    postgres: None, alice: Any, workspace: Any
) -> None:
    laptop = pair(alice)
    suite(alice, cases=2)
    start(alice, laptop)
    assert not [s for s in _prepared() if _is_start_read(s)]
    start(alice, laptop)
    start(alice, laptop)
    assert len([s for s in _prepared() if _is_start_read(s)]) == 1


@pytest.mark.django_db
def test_a_run_start_is_planned_once_not_on_every_run(
    postgres: None, alice: Any, workspace: Any
) -> None:
    """PostgreSQL plans a prepared statement afresh for its first five runs, then keeps its
    generic plan unless that looks dearer: the start's read and its one writing statement
    must not look dearer, or every start pays their planning."""
    laptop = pair(alice)
    suite(alice, cases=2)
    for _ in range(9):
        start(alice, laptop, repeats=2)
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans FROM pg_prepared_statements")
        plans = {
            "read" if _is_start_read(sql) else "write": generic
            for sql, generic in cursor.fetchall()
            if _is_start_read(sql) or sql.startswith('WITH r AS (INSERT INTO "scorecards_run"')
        }
    assert plans == {"read": 3, "write": 3}


@pytest.mark.django_db
@override_settings(EVERDICT_DB_PREPARE=False)
def test_with_preparing_off_nothing_is_prepared(postgres: None, alice: Any, workspace: Any) -> None:
    laptop = pair(alice)
    suite(alice, cases=2)
    for _ in range(3):
        start(alice, laptop)
    assert _prepared() == []


@pytest.fixture
def other_connection() -> Iterator[psycopg.Connection[Any]]:
    """A second session on the test database, as a migration would run in."""
    settings = connection.settings_dict
    with psycopg.connect(
        dbname=settings["NAME"],
        host=settings["HOST"] or None,
        port=settings["PORT"] or None,
        user=settings["USER"] or None,
        password=settings["PASSWORD"] or None,
        autocommit=True,
    ) as other:
        yield other
        # The test database is shared by the tests after this one, and so is this
        # process's connection, whose statements were prepared for the other type.
        other.execute("ALTER TABLE auth_user ALTER COLUMN first_name TYPE varchar(150)")
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_a_column_retyped_under_a_prepared_statement_costs_at_most_one_transaction(
    postgres: None, alice: Any, other_connection: psycopg.Connection[Any]
) -> None:
    issued = api_key_create(user=alice)
    # The key's lookup reads the user's columns; it is prepared by its second run.
    for _ in range(3):
        assert api_key_authenticate(issued.key) is not None
    assert any("auth_user" in s for s in _prepared())

    # Outside a transaction the refused statement runs again at once.
    other_connection.execute("ALTER TABLE auth_user ALTER COLUMN first_name TYPE varchar(200)")
    assert api_key_authenticate(issued.key) is not None
    assert api_key_authenticate(issued.key) is not None

    # Inside one, that transaction is refused; its rollback lets the next one through.
    for _ in range(3):
        assert api_key_authenticate(issued.key) is not None
    other_connection.execute("ALTER TABLE auth_user ALTER COLUMN first_name TYPE varchar(250)")
    refused = pytest.raises(DatabaseError, match="cached plan must not change result type")
    with refused, transaction.atomic():
        api_key_authenticate(issued.key)
    with transaction.atomic():
        assert api_key_authenticate(issued.key) is not None


def _query_classes() -> tuple[Any, type]:
    """The query class `core.prebuilt`'s cursors convert statements with, and psycopg's."""
    from psycopg._queries import PostgresQuery

    from core import prebuilt

    preparing: Any = prebuilt._preparing_cursors()[0]
    return preparing._query_cls, PostgresQuery


def _many(rows: int) -> str:
    """A multi-row `VALUES` of 30 columns a row, as a batch of results is inserted."""
    row = "(" + ", ".join(["%s"] * 30) + ")"
    return f"SELECT count(*) FROM (VALUES {', '.join([row] * rows)}) v"


@pytest.mark.django_db
def test_a_statement_of_many_parameters_is_converted_once_per_process(postgres: None) -> None:
    from core import prebuilt

    converted, _ = _query_classes()
    sql = _many(8)  # 240 parameters: psycopg itself keeps no conversion past 50
    before = converted.convert_text.cache_info()
    for _ in range(3):
        with prebuilt.cursor(connection.alias) as cursor:
            cursor.execute(sql, list(range(240)))
            assert cursor.fetchone() == (8,)
    after = converted.convert_text.cache_info()
    assert after.misses - before.misses <= 1
    assert after.hits - before.hits >= 2


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("SELECT %s::int + %s::int", [1, 2]),
        ("SELECT '100%%', %s, %b, %t", ["a", b"\x00\x01", 3]),
        (_many(8), [*range(200), *[f"text {i}" for i in range(40)]]),
        (_many(3), [None] * 90),
    ],
    ids=["few", "literal percent and formats", "many", "nulls"],
)
def test_a_converted_statement_is_what_psycopg_would_send(
    postgres: None, sql: str, params: list[Any]
) -> None:
    from psycopg.adapt import Transformer

    converted, psycopgs = _query_classes()
    connection.ensure_connection()
    sent = []
    for query_class in (converted, psycopgs, converted):  # the second time from what it keeps
        query = query_class(Transformer(connection.connection))
        query.convert(sql, params)
        sent.append((query.query, query.params, query.types, query.formats))
    assert sent[0] == sent[1] == sent[2]
