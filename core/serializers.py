"""The base of every request body the REST API reads."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """A body naming a field this serializer does not know is refused (400), never read as
    if the field were absent: `{"repeat": 3}` for `repeats` must not silently run once."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(str(name) for name in data if name not in self.fields)
            if unknown:
                known = ", ".join(self.fields)
                raise serializers.ValidationError(
                    {name: [f"Unknown field; this body takes: {known}."] for name in unknown}
                )
        return super().to_internal_value(data)
