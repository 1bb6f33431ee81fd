"""What a run's start reads, in one statement: the submitter's membership with the workspace
row locked, the harness and dataset versions it names, and the submitter's active runners.

A run start is one of the API's hottest writes; its reads are SQL built once per process
(`core.prebuilt`) rather than querysets compiled on every request.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.db import connections

from core import prebuilt
from core.errors import Forbidden, NotFound
from runners.models import Runner
from scorecards.models import DatasetVersion, HarnessVersion, Membership, Role, Workspace
from scorecards.selectors.catalog import version_missing

if TYPE_CHECKING:
    from django.contrib.auth.models import User

_DATASET = ("id", "workspace_id", "name", "version", "case_count")


@dataclass(frozen=True)
class StartReads:
    membership: Membership
    harness: HarnessVersion
    dataset: DatasetVersion
    runners: list[Runner]  # active, the submitter's own (only the one named, when named)


@dataclass(frozen=True)
class _Shape:
    sql: str
    parts: tuple[prebuilt.Columns, ...]  # membership, workspace, harness, author, dataset, runner


@cache
def _shape(alias: str) -> _Shape:
    connection = connections[alias]
    quote = connection.ops.quote_name
    user_model = get_user_model()
    parts = (
        prebuilt.columns(Membership, alias),
        prebuilt.columns(Workspace, alias),
        prebuilt.columns(HarnessVersion, alias),
        prebuilt.columns(user_model, alias),
        prebuilt.columns(DatasetVersion, alias, _DATASET),
        prebuilt.columns(Runner, alias),
    )
    selected = ", ".join(
        name
        for part, table_alias in zip(parts, ("m", "w", "hv", "u", "dv", "r"), strict=True)
        for name in part.select(table_alias, alias)
    )

    def col(model: Any, name: str, table_alias: str) -> str:
        return f"{table_alias}.{prebuilt.column(model, name, alias)}"

    def latest(model: Any) -> str:
        # The named version, or the latest when the version is NULL.
        t = "v"
        return (
            f"(SELECT {col(model, 'id', t)} FROM {prebuilt.table(model, alias)} {t} "
            f"WHERE {col(model, 'workspace_id', t)} = {col(Workspace, 'id', 'w')} "
            f"AND {col(model, 'name', t)} = %s "
            f"AND (CAST(%s AS integer) IS NULL OR {col(model, 'version', t)} = %s) "
            f"ORDER BY {col(model, 'version', t)} DESC LIMIT 1)"
        )

    user_pk = quote(user_model._meta.pk.column)
    sql = (
        f"SELECT {selected} FROM {prebuilt.table(Membership, alias)} m "
        f"JOIN {prebuilt.table(Workspace, alias)} w "
        f"ON {col(Workspace, 'id', 'w')} = {col(Membership, 'workspace_id', 'm')} "
        f"LEFT JOIN {prebuilt.table(HarnessVersion, alias)} hv "
        f"ON {col(HarnessVersion, 'id', 'hv')} = {latest(HarnessVersion)} "
        f"LEFT JOIN {quote(user_model._meta.db_table)} u "
        f"ON u.{user_pk} = {col(HarnessVersion, 'created_by_id', 'hv')} "
        f"LEFT JOIN {prebuilt.table(DatasetVersion, alias)} dv "
        f"ON {col(DatasetVersion, 'id', 'dv')} = {latest(DatasetVersion)} "
        f"LEFT JOIN {prebuilt.table(Runner, alias)} r "
        f"ON {col(Runner, 'owner_id', 'r')} = {col(Membership, 'user_id', 'm')} "
        f"AND {col(Runner, 'revoked_at', 'r')} IS NULL "
        f"AND (CAST(%s AS bigint) IS NULL OR {col(Runner, 'id', 'r')} = %s) "
        f"WHERE {col(Workspace, 'slug', 'w')} = %s AND {col(Membership, 'user_id', 'm')} = %s "
        # Runner's own ordering, as `Runner.objects` lists them.
        f"ORDER BY {col(Runner, 'label', 'r')}, {col(Runner, 'id', 'r')}"
    )
    if connection.features.has_select_for_update_of:
        # The workspace row serializes run creation (its quota holds under races).
        sql += " FOR UPDATE OF w"
    return _Shape(sql=sql, parts=parts)


def start_reads(
    *,
    user: User,
    slug: str,
    harness: str,
    harness_version: int | None,
    dataset: str,
    dataset_version: int | None,
    runner_id: int | None,
) -> StartReads:
    """Read what a run start needs, locking the workspace row, in one statement.

    Outsiders get NotFound and weaker members Forbidden, as `require_role`; a harness or
    dataset (version) missing is NotFound as `harness_get` and `dataset_get` say it.
    `runner_id` narrows the runners to that one (none when it is not the submitter's).
    """
    alias = Membership.objects.db
    shape = _shape(alias)
    params = [harness, harness_version, harness_version]
    params += [dataset, dataset_version, dataset_version, runner_id, runner_id, slug, user.pk]
    with prebuilt.cursor(alias) as cursor:
        cursor.execute(shape.sql, params)
        rows = cursor.fetchall()
    if not rows:
        raise NotFound("Workspace not found.")
    wanted = ((harness, harness_version), (dataset, dataset_version))
    return _reads(alias, shape.parts, rows, user=user, wanted=wanted, slug=slug)


def _reads(
    alias: str,
    parts: tuple[prebuilt.Columns, ...],
    rows: list[tuple[Any, ...]],
    *,
    user: User,
    wanted: tuple[tuple[str, int | None], tuple[str, int | None]],
    slug: str,
) -> StartReads:
    cells = [_split(parts, row) for row in rows]
    first = cells[0]
    membership = parts[0].instance(alias, first[0])
    if not membership.allows(Role.MEMBER):
        raise Forbidden(f"This needs the {Role.MEMBER} role in workspace {slug!r}.")
    workspace = parts[1].instance(alias, first[1])
    membership.workspace, membership.user = workspace, user
    if first[2][0] is None:
        raise NotFound(version_missing("Harness", *wanted[0], workspace))
    if first[4][0] is None:
        raise NotFound(version_missing("Dataset", *wanted[1], workspace))
    harness = parts[2].instance(alias, first[2])
    harness.workspace = workspace
    harness.created_by = None if first[3][0] is None else parts[3].instance(alias, first[3])
    dataset = parts[4].instance(alias, first[4])
    dataset.workspace = workspace
    runners = [parts[5].instance(alias, c[5]) for c in cells if c[5][0] is not None]
    for runner in runners:
        runner.owner = user
    return StartReads(membership=membership, harness=harness, dataset=dataset, runners=runners)


def _split(parts: tuple[prebuilt.Columns, ...], row: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    cells, at = [], 0
    for part in parts:
        cells.append(row[at : at + len(part.names)])
        at += len(part.names)
    return cells
