"""Catalog tools: `push_catalog`, a tree of harness and dataset files (a repo's `.everdict/`,
as `runnercli push` reads it) pushed as one change — the same service for every caller.
Creating versions needs the admin role, as on the page and the REST API."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from mcpgateway.auth import current_principal
from mcpgateway.calls import in_thread
from scorecards.replies.catalog import PushItem, PushReply
from scorecards.services import DatasetFile, HarnessFile, catalog_push

if TYPE_CHECKING:
    from django.contrib.auth.models import User

MAX_FILES = 500
FilePath = Annotated[str, Field(min_length=1, max_length=300, description="As in the repo.")]


class HarnessFileIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: FilePath
    name: Annotated[str, Field(max_length=100)]
    source: dict[str, Any] = Field(description="The harness as written: a spec, or an agent.")


class DatasetFileIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: FilePath
    name: Annotated[str, Field(max_length=100)]
    cases: list[Any] = Field(description="[{key, input, expected}, …], in order.")
    lines: list[int] | None = Field(
        default=None, description="The file's line of each case, so a refusal names it."
    )


def _pushed(user: User, **kwargs: Any) -> PushReply:
    workspace, pushed = catalog_push(user=user, **kwargs)
    return PushReply(
        workspace=workspace.slug,
        dry_run=kwargs["dry_run"],
        files=[PushItem.of(item) for item in pushed],
    )


async def push_catalog(
    harnesses: Annotated[list[HarnessFileIn], Field(max_length=MAX_FILES)] = [],  # noqa: B006
    datasets: Annotated[list[DatasetFileIn], Field(max_length=MAX_FILES)] = [],  # noqa: B006
    workspace: Annotated[
        str | None, Field(description="Default: the one workspace you are an admin of.")
    ] = None,
    dry_run: bool = False,
) -> PushReply:
    """Push harness and dataset files as one change: a new immutable version of each whose
    content differs from its latest version's (the same content is the same version), all or
    nothing; `dry_run` says what would be created and creates nothing."""
    user = current_principal().require_user("push_catalog")
    return await in_thread(
        _pushed,
        user=user,
        workspace_slug=workspace,
        harnesses=[HarnessFile(h.file, h.name, h.source) for h in harnesses],
        datasets=[DatasetFile(d.file, d.name, list(d.cases), d.lines) for d in datasets],
        dry_run=dry_run,
    )


CATALOG_TOOLS: list[Callable[..., Any]] = [push_catalog]
