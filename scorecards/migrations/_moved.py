"""What the feature apps' first migrations share: the content types of the models they took
over from the scorecards app, renamed to their new app (so that the permissions and the admin's
log entries naming them stay theirs), and named back when the migration is undone.

A module whose name starts with `_` is no migration of its own: Django's loader skips it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import migrations

OLD_APP = "scorecards"


def content_types_moved(models: Sequence[str], *, to: str) -> migrations.RunPython:
    def forward(apps: Any, schema_editor: Any) -> None:
        _rename(apps, schema_editor, models, old=OLD_APP, new=to)

    def backward(apps: Any, schema_editor: Any) -> None:
        _rename(apps, schema_editor, models, old=to, new=OLD_APP)

    return migrations.RunPython(forward, backward)


def _rename(apps: Any, schema_editor: Any, models: Sequence[str], *, old: str, new: str) -> None:
    content_types = apps.get_model("contenttypes", "ContentType").objects.using(
        schema_editor.connection.alias
    )
    for model in models:
        # A content type made meanwhile under the new name (by a `migrate` that stopped half
        # way) is left alone: two rows cannot share one name.
        if not content_types.filter(app_label=new, model=model).exists():
            content_types.filter(app_label=old, model=model).update(app_label=new)
