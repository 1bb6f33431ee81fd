"""The server's own passing trouble — a database that is unavailable, locked, restarting or
that chose this transaction as a deadlock victim — told apart from bugs and bad input.

A call refused for such a reason is worth sending again; anything else is final. Pages and
the REST API answer it 503, the MCP tools a tool error whose structured content says
`retryable`.
"""

from __future__ import annotations

import sqlite3

from django.db import InterfaceError, OperationalError

# PostgreSQL error codes that say "try again": connection exceptions (08), transaction
# rollbacks — serialization failure, deadlock (40), insufficient resources such as too many
# connections (53), operator intervention — admin shutdown, crash recovery, cannot connect
# now (57P), lock not available (55P03) and a database not accepting connections (55000).
_PG_RETRYABLE_CLASSES = ("08", "40", "53", "57P")
_PG_RETRYABLE_CODES = frozenset({"55P03", "55000", "55006"})
# SQLite says it in words only.
_SQLITE_RETRYABLE = (
    "database is locked",
    "database table is locked",
    "disk i/o error",
    "unable to open database file",
    "database schema has changed",
)


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 8:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _driver_says_transient(exc: BaseException) -> bool:
    if isinstance(exc, sqlite3.OperationalError):
        return str(exc).lower().startswith(_SQLITE_RETRYABLE)
    module = type(exc).__module__
    if module.startswith(("psycopg", "psycopg_pool")):
        sqlstate = getattr(exc, "sqlstate", None)
        if sqlstate is None:
            # No server answer at all: the connection failed, was refused, was dropped, or
            # the pool had none to give.
            return type(exc).__name__ in ("OperationalError", "InterfaceError", "PoolTimeout")
        return sqlstate.startswith(_PG_RETRYABLE_CLASSES) or sqlstate in _PG_RETRYABLE_CODES
    return False


def transient_cause(exc: BaseException) -> str | None:
    """Say what passing trouble of the server's own made `exc`, or None when it is not that
    (a bug, bad input, a refusal): only the former is worth retrying."""
    for link in _causes(exc):
        if _driver_says_transient(link):
            return f"database unavailable: {str(link).strip().splitlines()[0][:200]}"
    if isinstance(exc, OperationalError | InterfaceError) and exc.__cause__ is None:
        # Django's own "connection already closed" and the like.
        return f"database unavailable: {str(exc).strip()[:200]}"
    return None


class Unavailable(Exception):
    """The server could not serve this call for a passing reason of its own (`cause`)."""

    def __init__(self, cause: str) -> None:
        super().__init__(cause)
        self.cause = cause
