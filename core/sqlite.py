"""SQLite's real limit on a statement's parameters, told to Django.

Django assumes SQLite's old default of 999 parameters and splits a `bulk_create` of a
batch's rows into several INSERTs past it (a result row has 18 columns: 55 rows). The
library behind Python's `sqlite3` takes far more (32,766 since SQLite 3.32); each new
connection reads its own limit, so a batch's rows are one statement.
"""

from __future__ import annotations

import sqlite3
from typing import Any


def use_sqlite_parameter_limit(sender: Any, connection: Any, **kwargs: Any) -> None:
    """`connection_created` receiver: raise `max_query_params` to the connection's limit."""
    if connection.vendor != "sqlite":
        return
    limit = connection.connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    # A margin under the limit; never below Django's own assumption.
    connection.features.max_query_params = max(999, min(limit, 32_766) - 1)
