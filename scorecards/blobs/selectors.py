"""Reading an artifact back: found by run, case key, repeat and path for a member of the
run's workspace (anyone else is told it does not exist), and its bytes, bounded."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlencode

from core.errors import Invalid, NotFound
from runnercli.protocol import CasePathError, check_case_path
from scorecards.blobs.models import Artifact
from scorecards.blobs.store import blob_open
from scorecards.links import key_may_exist
from scorecards.selectors.runs import repeat_of, run_get

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def artifact_path(path: str) -> str:
    """A requested artifact path, normalised; Invalid (400) for one that could name anything
    outside a case's directory (NUL, `..`, absolute, a drive letter)."""
    try:
        normal = check_case_path(path)
    except CasePathError as exc:
        raise Invalid({"path": [str(exc)]}) from exc
    if not normal:
        raise Invalid({"path": ["Name the artifact's path."]})
    return normal


def artifact_find(
    *, user: User, run_id: int, key: str, path: str, repeat: str | int | None = None
) -> Artifact:
    """The artifact at `path` of the case's result on this repeat, for a member of the run's
    workspace (viewers included); NotFound for anyone else and for what does not exist."""
    run = run_get(user=user, run_id=run_id)
    number = repeat_of(run, repeat)
    if not key_may_exist(key):
        raise NotFound(f"No artifact {path!r} for case {key!r} of run {run_id}.")
    artifact = (
        Artifact.objects.select_related("blob")
        .filter(
            result__run=run,
            result__case__key=key,
            result__repeat=number,
            path=artifact_path(path),
        )
        .first()
    )
    if artifact is None:
        raise NotFound(f"No artifact {path!r} for case {key!r} of run {run_id}.")
    return artifact


def artifact_url(run_id: int, key: str, path: str, repeat: int, repeats: int) -> str:
    """Where an artifact is downloaded: `/api/runs/<id>/artifacts?key=K&path=P[&repeat=N]`."""
    query = {"key": key, "path": path, **({"repeat": repeat} if repeats > 1 else {})}
    return f"/api/runs/{run_id}/artifacts?{urlencode(query)}"


def artifact_head(artifact: Artifact, limit: int) -> tuple[bytes, bool]:
    """The artifact's first `limit` bytes, and whether there are more."""
    with blob_open(artifact.blob) as handle:
        head = bytes(handle.read(limit + 1))
    return head[:limit], len(head) > limit
