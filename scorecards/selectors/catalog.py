"""Reads of the catalog: harness and dataset versions, by name, latest first."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db.models import Count, OuterRef, QuerySet, Subquery

from core.errors import NotFound
from scorecards.models import DatasetVersion, HarnessVersion, Workspace
from scorecards.selectors.workspaces import membership_for

if TYPE_CHECKING:
    from django.contrib.auth.models import User


@dataclass(frozen=True)
class HarnessEntry:
    """A harness name as listed: its latest version and how many versions it has."""

    latest: HarnessVersion
    versions: int


@dataclass(frozen=True)
class DatasetEntry:
    latest: DatasetVersion
    versions: int


def harness_get(*, workspace: Workspace, name: str, version: int | None) -> HarnessVersion:
    """Return a version of a harness, the latest when `version` is None."""
    versions = HarnessVersion.objects.filter(workspace=workspace, name=name)
    chosen = versions.order_by("-version") if version is None else versions.filter(version=version)
    found = chosen.first()
    if found is None:
        raise NotFound(version_missing("Harness", name, version, workspace))
    return found


def dataset_get(*, workspace: Workspace, name: str, version: int | None) -> DatasetVersion:
    """Return a version of a dataset, the latest when `version` is None."""
    versions = DatasetVersion.objects.filter(workspace=workspace, name=name)
    chosen = versions.order_by("-version") if version is None else versions.filter(version=version)
    found = chosen.first()
    if found is None:
        raise NotFound(version_missing("Dataset", name, version, workspace))
    return found


def _chosen(versions: QuerySet[Any], version: int | None) -> QuerySet[Any]:
    return versions.order_by("-version") if version is None else versions.filter(version=version)


def version_missing(kind: str, name: str, version: int | None, workspace: Workspace) -> str:
    if version is None:
        return f"{kind} {name!r} not found in workspace {workspace.slug!r}."
    return f"{kind} {name!r} v{version} not found in workspace {workspace.slug!r}."


def _latest_per_name(versions: QuerySet[Any]) -> QuerySet[Any]:
    """The latest version of each name, annotated with `version_count`, in name order."""
    same_name = versions.model.objects.filter(
        workspace=OuterRef("workspace"), name=OuterRef("name")
    )
    return (
        versions.filter(version=Subquery(same_name.order_by("-version").values("version")[:1]))
        .annotate(
            version_count=Subquery(
                same_name.order_by().values("name").annotate(n=Count("pk")).values("n")[:1]
            )
        )
        .order_by("name")
    )


def harness_list(*, user: User, workspace_slug: str) -> list[HarnessEntry]:
    """List each harness of a workspace at its latest version (any member may read)."""
    workspace = membership_for(user=user, slug=workspace_slug).workspace
    latest = _latest_per_name(HarnessVersion.objects.filter(workspace=workspace))
    return [HarnessEntry(latest=h, versions=h.version_count) for h in latest]


def dataset_list(*, user: User, workspace_slug: str) -> list[DatasetEntry]:
    """List each dataset of a workspace at its latest version (any member may read)."""
    workspace = membership_for(user=user, slug=workspace_slug).workspace
    latest = _latest_per_name(DatasetVersion.objects.filter(workspace=workspace))
    return [DatasetEntry(latest=d, versions=d.version_count) for d in latest]


@dataclass
class VersionHistory:
    """Every version of one harness or dataset name, newest first."""

    name: str
    versions: list[Any] = field(default_factory=list)
    # What features add to the name's panel (a harness's judges' agreement with people).
    people_agreement: list[dict[str, Any]] = field(default_factory=list)

    @property
    def latest(self) -> Any:
        return self.versions[0]


def _histories(versions: Iterable[Any]) -> list[VersionHistory]:
    grouped: dict[str, VersionHistory] = {}
    for version in versions:
        grouped.setdefault(version.name, VersionHistory(version.name)).versions.append(version)
    return list(grouped.values())


def harness_histories(*, user: User, workspace_slug: str) -> list[VersionHistory]:
    workspace = membership_for(user=user, slug=workspace_slug).workspace
    versions = (
        HarnessVersion.objects.filter(workspace=workspace)
        .select_related("created_by")
        .order_by("name", "-version")
    )
    return _histories(versions)


def dataset_histories(*, user: User, workspace_slug: str) -> list[VersionHistory]:
    workspace = membership_for(user=user, slug=workspace_slug).workspace
    versions = (
        DatasetVersion.objects.filter(workspace=workspace)
        .select_related("created_by")
        .order_by("name", "-version")
    )
    return _histories(versions)
