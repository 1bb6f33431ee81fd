"""A member's runners as their roster lists them: the REST list, the account page and the
MCP tool read them here."""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from core import prebuilt
from runners.models import Runner

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def runners_of(owner: User | int) -> list[Runner]:
    """Every runner the member paired, revoked ones included, by label then id (the model's
    ordering). One statement written once (`core.prebuilt`): compiling the queryset cost
    twice the statement, and a client may poll the list."""
    alias = Runner.objects.db
    owner_id = owner if isinstance(owner, int) else owner.pk
    columns = prebuilt.columns(Runner, alias)
    with prebuilt.cursor(alias) as cursor:
        cursor.execute(_roster_sql(alias), [owner_id])
        return [columns.instance(alias, row) for row in cursor.fetchall()]


@cache
def _roster_sql(alias: str) -> str:
    owner = prebuilt.column(Runner, "owner_id", alias)
    order = ", ".join(f"r.{prebuilt.column(Runner, name, alias)}" for name in ("label", "id"))
    return f"{prebuilt.select_from(Runner, alias, 'r')} WHERE r.{owner} = %s ORDER BY {order}"
