"""A foreign key's own index, dropped where a composite index leads with its column.

Such an index is written on every insert and update of the row and answers nothing the
composite one does not. It is dropped by its name: `AlterField(db_index=False)` finds the
index to drop by introspection, which on PostgreSQL also matches a partial unique index on
the same column (`jobattempt_one_executing`) and drops that too.
"""

from __future__ import annotations

from django.db import migrations, models
from django.db.migrations.operations.base import Operation


def drop_own_index(
    model_name: str, name: str, field: models.ForeignKey[models.Model], *, table: str, index: str
) -> Operation:
    """The migration for a key made `db_index=False`: its index, named as Django named it."""
    column = field.db_column or f"{name}_id"
    return migrations.SeparateDatabaseAndState(
        database_operations=[
            migrations.RunSQL(
                f'DROP INDEX IF EXISTS "{index}"',
                reverse_sql=f'CREATE INDEX "{index}" ON "{table}" ("{column}")',
            )
        ],
        state_operations=[migrations.AlterField(model_name=model_name, name=name, field=field)],
    )
