"""The indexes search reads: trigram GIN indexes on PostgreSQL (`pg_trgm`), which `ILIKE`
uses; FTS5 tables with the `trigram` tokenizer on SQLite, kept by triggers on the tables they
index (external content: the text is not stored twice). Where SQLite lacks FTS5's trigram
tokenizer nothing is created and search scans, bounded, and says so."""

from __future__ import annotations

from typing import Any

from django.db import migrations

RESULT_COLUMNS = ("output", "reason", "error", "stderr_tail")

POSTGRES = [
    # What `django.contrib.postgres`'s TrigramExtension runs; that operation's reverse asks
    # SQLite for `pg_extension`, so the statement is run here, on PostgreSQL only.
    "CREATE EXTENSION IF NOT EXISTS pg_trgm",
    "CREATE INDEX search_traceevent_data_trgm ON scorecards_traceevent"
    " USING gin ((data::text) gin_trgm_ops)",
    *(
        f"CREATE INDEX search_caseresult_{column}_trgm ON scorecards_caseresult"
        f" USING gin ({column} gin_trgm_ops)"
        for column in RESULT_COLUMNS
    ),
]
POSTGRES_REVERSE = [
    "DROP INDEX IF EXISTS search_traceevent_data_trgm",
    *(f"DROP INDEX IF EXISTS search_caseresult_{column}_trgm" for column in RESULT_COLUMNS),
]


def fts_statements(fts: str, table: str, columns: tuple[str, ...]) -> list[str]:
    """An external-content FTS5 table over `columns` of `table`, and the triggers keeping it."""
    names = ", ".join(columns)
    new = ", ".join(f"new.{c}" for c in columns)
    old = ", ".join(f"old.{c}" for c in columns)
    insert = f"INSERT INTO {fts}(rowid, {names}) VALUES (new.id, {new});"
    delete = f"INSERT INTO {fts}({fts}, rowid, {names}) VALUES ('delete', old.id, {old});"
    return [
        f"CREATE VIRTUAL TABLE {fts} USING fts5({names}, content='{table}',"
        " content_rowid='id', tokenize='trigram')",
        f"CREATE TRIGGER {fts}_ai AFTER INSERT ON {table} BEGIN {insert} END",
        f"CREATE TRIGGER {fts}_ad AFTER DELETE ON {table} BEGIN {delete} END",
        f"CREATE TRIGGER {fts}_au AFTER UPDATE OF {names} ON {table} BEGIN {delete} {insert} END",
        f"INSERT INTO {fts}({fts}) VALUES ('rebuild')",
    ]


SQLITE = [
    *fts_statements("search_caseresult_fts", "scorecards_caseresult", RESULT_COLUMNS),
    *fts_statements("search_traceevent_fts", "scorecards_traceevent", ("data",)),
]
SQLITE_REVERSE = [
    f"DROP {kind} IF EXISTS {name}"
    for fts in ("search_caseresult_fts", "search_traceevent_fts")
    for kind, name in (
        ("TRIGGER", f"{fts}_ai"),
        ("TRIGGER", f"{fts}_ad"),
        ("TRIGGER", f"{fts}_au"),
        ("TABLE", fts),
    )
]


def _trigram_tokenizer(cursor: Any) -> bool:
    try:
        cursor.execute("CREATE VIRTUAL TABLE temp.search_probe USING fts5(x, tokenize='trigram')")
    except Exception:  # noqa: BLE001 — no FTS5, or no trigram tokenizer (SQLite < 3.34)
        return False
    cursor.execute("DROP TABLE temp.search_probe")
    return True


def forwards(apps: Any, schema_editor: Any) -> None:
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            statements = POSTGRES
        elif connection.vendor == "sqlite" and _trigram_tokenizer(cursor):
            statements = SQLITE
        else:
            return
        for statement in statements:
            cursor.execute(statement)


def backwards(apps: Any, schema_editor: Any) -> None:
    connection = schema_editor.connection
    reverse = {"postgresql": POSTGRES_REVERSE, "sqlite": SQLITE_REVERSE}
    with connection.cursor() as cursor:
        for statement in reverse.get(connection.vendor, []):
            cursor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("scorecards", "0009_protocol4"),
        ("traces", "0001_initial"),
    ]

    # The extension stays when this is reversed: other indexes may use it.
    operations = [migrations.RunPython(forwards, backwards)]
