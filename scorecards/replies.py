"""Reply shapes for scorecards, shared by the REST API, pages and MCP tools."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from scorecards.models import DatasetVersion, HarnessVersion, Workspace

if TYPE_CHECKING:
    from scorecards.catalog import DatasetEntry, HarnessEntry


def _money(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


def workspace_reply(workspace: Workspace, role: str) -> dict[str, Any]:
    """`{slug, name, run_quota, budget_usd, budget_tokens, spent_usd, spent_tokens, role}`."""
    return {
        "slug": workspace.slug,
        "name": workspace.name,
        "run_quota": workspace.run_quota,
        "budget_usd": _money(workspace.budget_usd),
        "budget_tokens": workspace.budget_tokens,
        "spent_usd": _money(workspace.spent_usd),
        "spent_tokens": workspace.spent_tokens,
        "role": role,
    }


def harness_reply(harness: HarnessVersion) -> dict[str, Any]:
    """`{name, version, spec, created_at}`."""
    return {
        "name": harness.name,
        "version": harness.version,
        "spec": harness.spec,
        "created_at": harness.created_at.isoformat(),
    }


def dataset_reply(dataset: DatasetVersion) -> dict[str, Any]:
    """`{name, version, cases, created_at}`; `cases` is the number of cases."""
    return {
        "name": dataset.name,
        "version": dataset.version,
        "cases": dataset.case_count,
        "created_at": dataset.created_at.isoformat(),
    }


def harness_items(entries: Iterable[HarnessEntry]) -> list[dict[str, Any]]:
    """Each harness at its latest version, with `versions`: how many it has."""
    return [harness_reply(e.latest) | {"versions": e.versions} for e in entries]


def dataset_items(entries: Iterable[DatasetEntry]) -> list[dict[str, Any]]:
    """Each dataset at its latest version, with `versions`: how many it has."""
    return [dataset_reply(e.latest) | {"versions": e.versions} for e in entries]
