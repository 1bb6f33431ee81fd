"""A request body's fields are copied for each body read, not built again, and read what
DRF's own deep copies read: the same values, the same refusals, nothing shared."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from django.core.validators import MaxLengthValidator
from rest_framework import serializers

from core.serializers import StrictSerializer
from runners.api import RunnerPairSerializer
from scorecards.api.runs import RunCreateSerializer


class DeepCopied(RunCreateSerializer):
    """The same body, its fields deep-copied as DRF's `Serializer` does."""

    def get_fields(self) -> dict[str, serializers.Field]:
        return copy.deepcopy(self._declared_fields)


BODIES: list[Any] = [
    {"harness": "h", "dataset": "d", "runtime": "self:any"},
    {
        "harness": "h",
        "harness_version": 2,
        "dataset": "d",
        "runtime": "self:4",
        "concurrency": 3,
        "repeats": 2,
        "metadata": {"git_sha": "abc1234", "n": [1, 2]},
        "max_cost_usd": "1.5",
    },
    {"harness": "x" * 101, "dataset": "", "runtime": None, "concurrency": 0},
    {"harness": "h", "dataset": "d", "runtime": "r", "repeats": "many", "metadata": 5},
    {"harness": "h", "dataset": "d", "runtime": "r", "max_cost_usd": "1e9"},
    {"harness": "h\x00", "dataset": "d", "runtime": "r", "repeat": 3},
    ["not", "an", "object"],
]


@pytest.mark.parametrize("body", BODIES)
def test_a_body_reads_as_with_drfs_deep_copies(body: Any) -> None:
    ours, drfs = RunCreateSerializer(data=body), DeepCopied(data=body)

    assert ours.is_valid() == drfs.is_valid()
    assert ours.errors == drfs.errors
    if not ours.errors:
        assert ours.validated_data == drfs.validated_data


def test_each_body_binds_fields_of_its_own_and_the_declared_ones_stay_unbound() -> None:
    first = RunCreateSerializer(data=BODIES[0])
    second = RunCreateSerializer(data=BODIES[1])
    assert first.is_valid() and second.is_valid()

    for name, field in first.fields.items():
        other, declared = second.fields[name], RunCreateSerializer._declared_fields[name]
        assert field is not other and field is not declared
        assert field.parent is first and other.parent is second
        assert field.validators is not other.validators
        assert field.validators is not declared.validators
        assert getattr(declared, "parent", None) is None
    # A field holding another (the metadata's values) is deep-copied, its child its own.
    metadata: Any = first.fields["metadata"]
    other_metadata: Any = second.fields["metadata"]
    assert metadata.child is not other_metadata.child
    assert metadata.child.parent is metadata


def test_a_validator_added_to_one_bound_field_reaches_no_other_body() -> None:
    bound = RunCreateSerializer(data={"harness": "h", "dataset": "d", "runtime": "r"})
    bound.fields["harness"].validators.append(MaxLengthValidator(0))
    assert not bound.is_valid()

    fresh = RunCreateSerializer(data={"harness": "h", "dataset": "d", "runtime": "r"})
    assert fresh.is_valid(), fresh.errors


def test_a_list_field_reads_as_declared_in_every_body() -> None:
    for capabilities in (["python", "node"], ["python"], "python", [1, None]):
        body = {"label": "laptop", "capabilities": capabilities}
        ours = RunnerPairSerializer(data=body)
        assert isinstance(ours, StrictSerializer)
        deep = type("Deep", (RunnerPairSerializer,), {"get_fields": DeepCopied.get_fields})
        drfs = deep(data=body)
        assert ours.is_valid() == drfs.is_valid()
        assert ours.errors == drfs.errors
