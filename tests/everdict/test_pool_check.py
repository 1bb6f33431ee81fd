"""A pooled PostgreSQL connection leaves the pool checked by its socket (`core.pooling`): no
round trip when nothing arrived on it while idle, the empty query when something did, and a
connection the server ended while idle is discarded, the next one handed out instead."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from databases import pooled_settings
from django.db import connection
from django.db.backends.postgresql.base import DatabaseWrapper as DjangoWrapper
from psycopg_pool import ConnectionPool

from core.pooling import check_pooled, readable
from core.postgresql.base import DatabaseWrapper

pytestmark = [pytest.mark.postgres_only, pytest.mark.django_db]


@pytest.fixture
def observer() -> Iterator[psycopg.Connection[Any]]:
    """A connection of its own, outside any transaction: what the server says of the
    others as it is now, not as a transaction's first look saw it."""
    if connection.vendor != "postgresql":
        pytest.skip("the pool is PostgreSQL's")
    with psycopg.connect(**connection.get_connection_params(), autocommit=True) as conn:
        yield conn


def pool_settings(options: dict[str, Any], *, health_checks: bool = True) -> dict[str, Any]:
    """The test database's settings with a pool of these `options`, as the settings make
    one for a server."""
    return pooled_settings(connection.settings_dict, options, health_checks=health_checks)


@contextmanager
def pooled(wrapper_class: type, alias: str) -> Iterator[Any]:
    """A database wrapper over the test database with a pool of one connection."""
    wrapper = wrapper_class(pool_settings({"min_size": 1, "max_size": 1}), alias=alias)
    try:
        yield wrapper
    finally:
        wrapper.close()
        wrapper.close_pool()


def checkout(wrapper: Any) -> Any:
    """The connection a request would get: taken from the pool (and checked)."""
    wrapper.close()
    wrapper.ensure_connection()
    return wrapper.connection


def last_statement(observer: psycopg.Connection[Any], pid: int) -> str:
    row = observer.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    assert row is not None, f"backend {pid} is gone"
    return str(row[0])


@pytest.mark.parametrize(
    ("wrapper_class", "sent"),
    [(DatabaseWrapper, "SELECT 'marker'"), (DjangoWrapper, "")],
    ids=["socket-check", "django's-empty-query"],
)
def test_an_idle_connection_leaves_the_pool_without_a_round_trip(
    observer: psycopg.Connection[Any], wrapper_class: type, sent: str
) -> None:
    with pooled(wrapper_class, f"pool-{wrapper_class.__module__}") as wrapper:
        conn = checkout(wrapper)
        pid = conn.info.backend_pid
        conn.execute("SELECT 'marker'")
        again = checkout(wrapper)
        assert again.info.backend_pid == pid
        # Django's pool sends the empty query at every checkout; ours sent nothing.
        assert last_statement(observer, pid) == sent


def test_a_connection_the_server_ended_while_idle_is_replaced_not_handed_out(
    observer: psycopg.Connection[Any],
) -> None:
    with pooled(DatabaseWrapper, "pool-ended") as wrapper:
        pid = checkout(wrapper).info.backend_pid
        wrapper.close()  # back in the pool, idle
        observer.execute("SELECT pg_terminate_backend(%s)", [pid])
        deadline = time.monotonic() + 10
        while observer.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone():
            assert time.monotonic() < deadline, "the backend was not ended"
            time.sleep(0.05)
        conn = checkout(wrapper)
        assert conn.info.backend_pid != pid
        assert conn.execute("SELECT 42").fetchone() == (42,)
        assert wrapper.pool.get_stats().get("connections_lost", 0) == 1


def test_a_connection_with_something_waiting_pays_the_round_trip_and_is_handed_out(
    observer: psycopg.Connection[Any],
) -> None:
    with pooled(DatabaseWrapper, "pool-notified") as wrapper:
        conn = checkout(wrapper)
        pid = conn.info.backend_pid
        conn.execute("LISTEN pool_check_test")
        wrapper.close()
        observer.execute("NOTIFY pool_check_test")
        deadline = time.monotonic() + 10
        while not readable(conn.pgconn.socket):
            assert time.monotonic() < deadline, "the notification did not arrive"
            time.sleep(0.05)
        again = checkout(wrapper)
        assert again.info.backend_pid == pid
        assert last_statement(observer, pid) == ""  # the check's empty query read it


def _made(pool: Any) -> dict[str, Any]:
    """What a pool was made with: its settings and the functions it calls, as comparable
    values (its name, counters, locks and queues are its own)."""
    kept = (int, float, str, bool, dict, type, type(None))
    made = {k: v for k, v in vars(pool).items() if isinstance(v, kept) and k != "name"}
    for hook in ("_check", "_configure", "_reset", "_reconnect_failed"):
        made[hook] = getattr(getattr(pool, hook), "__func__", getattr(pool, hook))
    return made


@pytest.mark.parametrize(
    "options",
    [{"min_size": 1, "max_size": 1}, {"min_size": 2, "max_size": 7, "timeout": 3, "max_idle": 60}],
    ids=["as-tested", "tuned"],
)
@pytest.mark.parametrize("health_checks", [True, False], ids=["checked", "unchecked"])
def test_the_pool_is_made_as_djangos_but_for_its_check(
    observer: psycopg.Connection[Any], options: dict[str, Any], health_checks: bool
) -> None:
    """The backend repeats Django's making of the pool to change its check: a Django
    upgrade that makes it otherwise fails here, naming what differs."""
    settings_dict = pool_settings(options, health_checks=health_checks)
    ours: Any = DatabaseWrapper(settings_dict, alias="made-ours")
    django: Any = DjangoWrapper(settings_dict, alias="made-django")
    try:
        mine, theirs = _made(ours.pool), _made(django.pool)
    finally:
        ours.close_pool()
        django.close_pool()
    assert mine.pop("_check") is (check_pooled if health_checks else None)
    assert theirs.pop("_check") is (ConnectionPool.check_connection if health_checks else None)
    assert mine == theirs
