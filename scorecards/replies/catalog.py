"""Reply shapes of the catalog: harness and dataset versions, and their lists."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, RootModel

from core.replies import Reply, Timestamp
from scorecards import lifecycle
from scorecards.models import DatasetVersion, HarnessVersion
from scorecards.selectors.catalog import DatasetEntry, HarnessEntry
from scorecards.services.pushes import Pushed


class HarnessReply(Reply):
    name: str
    version: int
    spec: dict[str, Any] = Field(description="What a case runs: the expansion of a preset.")
    source: dict[str, Any] | None = Field(
        description="What the author wrote, when it was an agent preset (null otherwise)."
    )
    created_at: Timestamp

    @classmethod
    def of(cls, harness: HarnessVersion) -> HarnessReply:
        return cls(
            name=harness.name,
            version=harness.version,
            spec=harness.spec,
            source=harness.source,
            created_at=harness.created_at,
        )


class HarnessItem(HarnessReply):
    """A harness as listed: its latest version, and how many versions it has."""

    versions: int
    people_agreement: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Per judge (prompt digest and model) of this harness's runs, how often "
        "people agreed with it: `agreed with people on 31 of 34 reviewed, 91 % [77-97]`.",
    )

    @classmethod
    def of_entry(cls, entry: HarnessEntry) -> HarnessItem:
        figures = lifecycle.harness_figures(entry.latest.workspace, entry.latest.name)
        return cls(**HarnessReply.of(entry.latest).model_dump(), versions=entry.versions, **figures)


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


class PushItem(Reply):
    """What a push did with one file: `created` (a new version), `unchanged` (the latest
    version holds this content already) or `would create` (a dry run)."""

    file: str
    kind: Literal["harness", "dataset"]
    name: str
    status: Literal["created", "unchanged", "would create"]
    version: int = Field(description="The version holding this content (or that would).")
    previous: int | None = Field(description="The latest version before the push.")
    changes: list[str] = Field(description="What differs from the previous version.")
    harness: HarnessReply | None = Field(
        default=None, description="The harness version, with its spec and source."
    )

    @classmethod
    def of(cls, pushed: Pushed) -> PushItem:
        harness = None if pushed.harness is None else HarnessReply.of(pushed.harness)
        return cls(
            file=pushed.file,
            kind=pushed.kind,
            name=pushed.name,
            status=pushed.status,
            version=pushed.version,
            previous=pushed.previous,
            changes=pushed.changes,
            harness=harness,
        )


class PushReply(Reply):
    """A push of a tree of harness and dataset files, file by file."""

    workspace: str
    dry_run: bool
    files: list[PushItem]
