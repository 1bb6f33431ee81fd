"""Artifacts of results, as the run's settlement reaches them (`scorecards.lifecycle`): a
result names blobs its job's workspace must hold already, and an accepted one records them."""

from __future__ import annotations

from collections.abc import Sequence

from runnercli.protocol import CaseResult, ResultReport, artifact_not_uploaded
from runners.models import Runner, RunnerJob
from scorecards.blobs.models import Artifact, Blob
from scorecards.lifecycle import Stored, result_check, results_stored
from scorecards.models import Run


@result_check
def artifact_refusals(*, runner: Runner, reports: Sequence[ResultReport]) -> dict[int, str]:
    """The reports (by job id) naming a blob their job's workspace does not hold, each with
    the reason. Only the runner's own jobs are looked at: anyone else's report is refused by
    its fence, revealing nothing of a workspace's blobs.

    Called inside the settling transaction; the blobs found are locked, so the GC cannot
    remove one between this check and the artifact rows that name it.
    """
    naming = [r for r in reports if r.result.artifacts]
    if not naming:
        return {}
    workspaces = dict(
        RunnerJob.objects.filter(pk__in=[r.job_id for r in naming], leased_by=runner).values_list(
            "pk", "run__workspace_id"
        )
    )
    refusals: dict[int, str] = {}
    for report in naming:
        workspace_id = workspaces.get(report.job_id)
        if workspace_id is not None:
            problem = _first_missing(workspace_id, report.result)
            if problem:
                refusals[report.job_id] = problem
    return refusals


def _first_missing(workspace_id: int, result: CaseResult) -> str | None:
    refs = result.artifacts or []
    held = dict(
        Blob.objects.select_for_update()
        .filter(workspace_id=workspace_id, sha256__in={ref.sha256 for ref in refs})
        .values_list("sha256", "size")
    )
    for ref in refs:
        if ref.sha256 not in held:
            return artifact_not_uploaded(ref.path, ref.sha256)
        if held[ref.sha256] != ref.size:
            return (
                f"artifact {ref.path} (sha256 {ref.sha256}) says {ref.size} bytes; "
                f"the blob holds {held[ref.sha256]}"
            )
    return None


@results_stored
def artifacts_record(*, run: Run, stored: Sequence[Stored]) -> None:
    """Record the artifacts of results just stored (their blobs checked by
    `artifact_refusals` in the same transaction)."""
    pairs = [(kept.row, ref) for kept in stored for ref in kept.result.artifacts or []]
    if not pairs:
        return
    blobs = dict(
        Blob.objects.filter(
            workspace_id=run.workspace_id, sha256__in={ref.sha256 for _, ref in pairs}
        ).values_list("sha256", "pk")
    )
    Artifact.objects.bulk_create(
        Artifact(
            result=row,
            path=ref.path,
            blob_id=blobs[ref.sha256],
            size=ref.size,
            media_type=ref.media_type,
        )
        for row, ref in pairs
    )
