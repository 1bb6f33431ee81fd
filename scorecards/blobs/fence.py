"""The runner's blob calls, fenced like its log: only the lease's current holder may ask what
its job's workspace holds or upload to it, and the workspace is read from the lease, never
from the caller."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.db import transaction
from django.db.models import Model
from django.utils import timezone

from core import prebuilt
from core.errors import Conflict
from runnercli.protocol import BlobAck, BlobHoldings
from runners.models import Runner, RunnerJob
from runners.queue.fence import RESUMED, holds_params, holds_sql, refused, take_back
from runners.queue.rows import locked_job
from scorecards.blobs.uploads import blob_holdings, blob_put
from scorecards.models import Run


def lease_workspace(
    *, runner: Runner, job_id: int, lease_epoch: int, call: str
) -> tuple[int | None, str]:
    """The workspace of the job this runner holds at this epoch (taking a lapsed lease back),
    and `resumed` when it did; `(None, why)` when the runner does not hold it."""
    held = held_workspace(runner, job_id, lease_epoch)
    if held is not None:
        return held, ""
    with transaction.atomic():
        job = locked_job(job_id)
        if job is None or not take_back(job, runner, lease_epoch, timezone.now()):
            return None, refused(call, job, runner, lease_epoch).reason
        workspace_id = RunnerJob.objects.filter(pk=job_id).values_list(
            "run__workspace_id", flat=True
        )[0]
    return workspace_id, RESUMED


def held_workspace(runner: Runner, job_id: int, lease_epoch: int) -> int | None:
    """The workspace of the job when this runner holds it at this epoch, else None (one
    statement, built once per process)."""
    alias = RunnerJob.objects.db
    with prebuilt.cursor(alias) as cursor:
        cursor.execute(_held_sql(alias), held_job_params(runner, job_id, lease_epoch))
        row = cursor.fetchone()
    return None if row is None else int(row[0])


@cache
def _held_sql(alias: str) -> str:
    held = held_job_sql(alias)
    return f"SELECT {held.workspace} FROM {held.tables} WHERE {held.condition}"


@dataclass(frozen=True)
class HeldJobSql:
    """The pieces of a statement that reads a job only while a runner holds it at an epoch:
    `tables` joins the job (`j`) to its run (`r`), `condition` is the fence (its parameters:
    `held_job_params`), `workspace` the run's workspace column."""

    tables: str
    condition: str
    workspace: str


@cache
def held_job_sql(alias: str) -> HeldJobSql:
    def col(model: type[Model], name: str) -> str:
        return prebuilt.column(model, name, alias)

    job, run = prebuilt.table(RunnerJob, alias), prebuilt.table(Run, alias)
    return HeldJobSql(
        tables=f"{job} j JOIN {run} r ON r.{col(Run, 'id')} = j.{col(RunnerJob, 'run')}",
        condition=f"j.{col(RunnerJob, 'id')} = %s AND {holds_sql('j', alias)}",
        workspace=f"r.{col(Run, 'workspace')}",
    )


def held_job_params(runner: Runner, job_id: int, lease_epoch: int) -> list[Any]:
    return [job_id, *holds_params(runner.pk, lease_epoch)]


def job_blob_holdings(
    *, runner: Runner, job_id: int, lease_epoch: int, sha256s: Sequence[str]
) -> BlobHoldings:
    """`have_blobs`: which of these blobs the job's workspace lacks (a Conflict, the tool
    error the runner reads, when the runner does not hold the job)."""
    workspace_id, why = lease_workspace(
        runner=runner, job_id=job_id, lease_epoch=lease_epoch, call="have_blobs"
    )
    if workspace_id is None:
        raise Conflict(why)
    return blob_holdings(workspace=workspace_id, sha256s=sha256s)


def job_blob_put(
    *,
    runner: Runner,
    job_id: int,
    lease_epoch: int,
    sha256: str,
    offset: int,
    data: bytes,
    final: bool,
) -> BlobAck:
    """`put_blob`: one chunk of a blob of the job's workspace (refused when the runner does
    not hold the job)."""
    workspace_id, why = lease_workspace(
        runner=runner, job_id=job_id, lease_epoch=lease_epoch, call="put_blob"
    )
    if workspace_id is None:
        return BlobAck(accepted=False, reason=why)
    return blob_put(workspace=workspace_id, sha256=sha256, offset=offset, data=data, final=final)
