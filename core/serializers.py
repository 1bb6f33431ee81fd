"""The base of every request body the REST API reads."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """A body naming a field this serializer does not know is refused (400), never read as
    if the field were absent: `{"repeat": 3}` for `repeats` must not silently run once."""

    def get_fields(self) -> dict[str, serializers.Field]:
        """The declared fields, each this instance's own to bind.

        DRF deep-copies them, which builds every field again from its arguments (its
        validators with it): most of a short body's validation, a run start's included. A
        field that holds no other field is copied as it stands instead; it keeps no state
        of its own between requests but what binding sets on the copy. A field holding
        others (a list's child, a nested body) is deep-copied as DRF does."""
        return {
            name: _copied(field) if _flat(field) else copy.deepcopy(field)
            for name, field in self._declared_fields.items()
        }

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(str(name) for name in data if name not in self.fields)
            if unknown:
                known = ", ".join(self.fields)
                raise serializers.ValidationError(
                    {name: [f"Unknown field; this body takes: {known}."] for name in unknown}
                )
        return super().to_internal_value(data)


def _flat(field: serializers.Field) -> bool:
    return not isinstance(field, serializers.BaseSerializer) and not any(
        hasattr(field, name) for name in ("child", "child_relation")
    )


def _copied(field: serializers.Field) -> serializers.Field:
    """A new field with the same attributes (what `copy.copy` makes, without its protocol),
    and a list of validators of its own, should anything add one to a bound field."""
    new = object.__new__(type(field))
    new.__dict__.update(field.__dict__)
    if "_validators" in new.__dict__:
        new.__dict__["_validators"] = list(new.__dict__["_validators"])
    return new
