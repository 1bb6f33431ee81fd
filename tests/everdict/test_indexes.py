"""Every foreign key of ours leads an index (a delete of what it points to finds its rows
without a scan), and exactly one way: a key's own index beside a composite index that leads
with it is written on every insert and update of the row for nothing."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.db import connection, models

OURS = ("accounts", "runners", "scorecards")


def _our_models() -> list[type[models.Model]]:
    return [
        model
        for model in apps.get_models()
        if model.__module__.split(".")[0] in OURS and not model._meta.proxy
    ]


def _leading(model: type[models.Model]) -> set[str]:
    """The fields that lead a composite index or unique constraint on the whole table (a
    partial one does not serve a delete)."""
    meta = model._meta
    led: set[str] = set()
    for index in meta.indexes:
        if index.fields and index.condition is None and len(index.fields) > 1:
            led.add(index.fields[0].lstrip("-"))
    for constraint in meta.constraints:
        if (
            isinstance(constraint, models.UniqueConstraint)
            and constraint.condition is None
            and len(constraint.fields) > 1
        ):
            led.add(constraint.fields[0])
    for together in meta.unique_together:
        led.add(together[0])
    return led


def _foreign_keys(model: type[models.Model]) -> list[models.ForeignKey[models.Model]]:
    return [
        field
        for field in model._meta.local_concrete_fields
        if isinstance(field, models.ForeignKey) and not field.primary_key
    ]


def _own_index(field: models.ForeignKey[models.Model]) -> bool:
    """Whether the key has an index of its own (`db_index`, which the stubs do not declare)."""
    return bool(vars(field)["db_index"]) and not field.unique


def test_every_foreign_key_leads_an_index() -> None:
    unindexed = [
        f"{model.__name__}.{field.name}"
        for model in _our_models()
        for field in _foreign_keys(model)
        if not (_own_index(field) or field.unique or field.name in _leading(model))
    ]
    assert unindexed == []


def test_no_foreign_key_has_an_index_a_composite_one_makes_redundant() -> None:
    redundant = [
        f"{model.__name__}.{field.name}"
        for model in _our_models()
        for field in _foreign_keys(model)
        if _own_index(field) and field.name in _leading(model)
    ]
    assert redundant == []


@pytest.mark.django_db
def test_the_database_holds_the_indexes_the_models_declare() -> None:
    """The migrations drop a redundant index by its name: the live tables agree, for every
    key without an index of its own."""
    with connection.cursor() as cursor:
        for model in _our_models():
            keys = [f.column for f in _foreign_keys(model) if not _own_index(f) and not f.unique]
            if not keys:
                continue
            table = model._meta.db_table
            found = connection.introspection.get_constraints(cursor, table)
            declared = {i.name for i in model._meta.indexes}
            declared |= {c.name for c in model._meta.constraints}
            for column in keys:
                alone = [
                    name
                    for name, c in found.items()
                    if c["index"] and c["columns"] == [column] and name not in declared
                ]
                assert alone == [], (table, alone)
                assert any(
                    (c["index"] or c["unique"]) and c["columns"][:1] == [column]
                    for c in found.values()
                ), (table, column)
