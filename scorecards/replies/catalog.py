"""Reply shapes of the catalog: harness and dataset versions, and their lists."""

from __future__ import annotations

from typing import Any

from pydantic import Field, RootModel

from core.replies import Reply, Timestamp
from scorecards.models import DatasetVersion, HarnessVersion
from scorecards.selectors.catalog import DatasetEntry, HarnessEntry


class HarnessReply(Reply):
    name: str
    version: int
    spec: dict[str, Any]
    created_at: Timestamp

    @classmethod
    def of(cls, harness: HarnessVersion) -> HarnessReply:
        return cls(
            name=harness.name,
            version=harness.version,
            spec=harness.spec,
            created_at=harness.created_at,
        )


class HarnessItem(HarnessReply):
    """A harness as listed: its latest version, and how many versions it has."""

    versions: int

    @classmethod
    def of_entry(cls, entry: HarnessEntry) -> HarnessItem:
        return cls(**HarnessReply.of(entry.latest).model_dump(), versions=entry.versions)


class HarnessItems(RootModel[list[HarnessItem]]):
    """The REST list of a workspace's harnesses."""


class DatasetReply(Reply):
    name: str
    version: int
    cases: int = Field(description="The number of cases.")
    created_at: Timestamp

    @classmethod
    def of(cls, dataset: DatasetVersion) -> DatasetReply:
        return cls(
            name=dataset.name,
            version=dataset.version,
            cases=dataset.case_count,
            created_at=dataset.created_at,
        )


class DatasetItem(DatasetReply):
    """A dataset as listed: its latest version, and how many versions it has."""

    versions: int

    @classmethod
    def of_entry(cls, entry: DatasetEntry) -> DatasetItem:
        return cls(**DatasetReply.of(entry.latest).model_dump(), versions=entry.versions)


class DatasetItems(RootModel[list[DatasetItem]]):
    """The REST list of a workspace's datasets."""
