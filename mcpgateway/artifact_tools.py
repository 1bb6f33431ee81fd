"""Personal tools for a case and its artifacts: what `GET /api/runs/<id>/cases/<key>` and
`GET /api/runs/<id>/artifacts` answer, with the same authorization (any member of the run's
workspace; anyone else is told it does not exist)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from mcpgateway.auth import current_principal
from mcpgateway.calls import in_thread
from scorecards.blobs.replies import ArtifactContent
from scorecards.blobs.selectors import artifact_find, artifact_head
from scorecards.cases.replies import CaseReply
from scorecards.cases.selectors import case_detail

if TYPE_CHECKING:
    from django.contrib.auth.models import User

RunId = Annotated[int, Field(ge=1, le=2**63 - 1)]
# The most of an artifact one answer carries; the rest is downloaded from its `url`.
MAX_ARTIFACT_CONTENT_BYTES = 1024 * 1024


def _case(user: User, run_id: int, key: str) -> CaseReply:
    return CaseReply.of(case_detail(user=user, run_id=run_id, key=key))


def _artifact(user: User, run_id: int, key: str, path: str, repeat: int | None) -> ArtifactContent:
    artifact = artifact_find(user=user, run_id=run_id, key=key, path=path, repeat=repeat)
    head, truncated = artifact_head(artifact, MAX_ARTIFACT_CONTENT_BYTES)
    run = artifact.result.run
    return ArtifactContent.read(artifact, run, key, artifact.result.repeat, head, truncated)


async def get_case(run_id: RunId, key: str) -> CaseReply:
    """One case of a run, whole: input, expected, each repeat's result with its artifacts,
    the attempt ledger and the case's log lines."""
    user = current_principal().require_user("get_case")
    return await in_thread(_case, user=user, run_id=run_id, key=key)


async def get_artifact(
    run_id: RunId,
    key: str,
    path: str,
    repeat: Annotated[
        int | None, Field(ge=0, description="Which repeat (0-based), when the run has several.")
    ] = None,
) -> ArtifactContent:
    """An artifact of a case: its metadata and content — text as text, anything else as
    base64 — the first MiB of it (`truncated` says there is more, at `url`)."""
    user = current_principal().require_user("get_artifact")
    return await in_thread(_artifact, user=user, run_id=run_id, key=key, path=path, repeat=repeat)


ARTIFACT_TOOLS: list[Callable[..., Any]] = [get_case, get_artifact]
