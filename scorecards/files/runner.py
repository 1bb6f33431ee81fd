"""The runner's side of the fs rendezvous: the poll takes the requests for the jobs its runner
holds, gives back what it could not deliver, and the runner answers — each step one
statement, fenced by the lease (see `services`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core.fields import ascii_int
from runnercli.protocol import Ack, BlobRef, FsEntry, FsPosted, FsRequest
from runners.models import JobStatus, Runner, RunnerJob
from runners.queue.fence import holds_params, holds_sql
from runners.wakeup import FS_ANSWER_CHANNEL, answers
from scorecards.blobs.services import blob_held, lease_workspace
from scorecards.files.models import CaseFsRequest
from scorecards.files.services import (
    BIGINT,
    EPOCH,
    FsContent,
    answer_timeout_s,
    async_commit,
    on_postgres,
)

if TYPE_CHECKING:
    from scorecards.blobs.services import Blob


def fs_requests_take(*, runner: Runner, fences: Sequence[tuple[int, int]]) -> list[FsRequest]:
    """The open requests (at most 100, oldest first) for the jobs this runner holds at these
    epochs, marked as taken — in one statement (a poll usually finds none)."""
    wanted = sorted({(j, e) for j, e in fences if 0 < j < BIGINT and 0 <= e < EPOCH})
    if not wanted:
        return []
    table, jobs = CaseFsRequest._meta.db_table, RunnerJob._meta.db_table
    cutoff = timezone.now() - timedelta(seconds=answer_timeout_s())
    adapt = connection.ops.adapt_datetimefield_value
    pairs = " OR ".join(["(r.job_id = %s AND r.lease_epoch = %s)"] * len(wanted))
    # Taken once: two polls of one runner (the old one still parked while a fresh one takes
    # over) never both answer a request (the second finds `taken_at` set).
    sql = (
        f"UPDATE {table} SET taken_at = %s WHERE taken_at IS NULL AND id IN ("
        f"SELECT r.id FROM {table} r JOIN {jobs} j ON j.id = r.job_id "
        f"WHERE ({pairs}) AND j.status = %s AND j.leased_by_id = %s "
        "AND j.lease_epoch = r.lease_epoch AND r.answered_at IS NULL "
        "AND r.taken_at IS NULL AND r.created_at >= %s ORDER BY r.id LIMIT 100) "
        f"RETURNING id, job_id, op, path{', ' + async_commit() if on_postgres() else ''}"
    )
    params = [adapt(timezone.now()), *(x for pair in wanted for x in pair)]
    params += [JobStatus.LEASED, runner.pk, adapt(cutoff)]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = sorted(row[:4] for row in cursor.fetchall())
    return [
        FsRequest(request_id=str(pk), job_id=job_id, op=op, path=path)
        for pk, job_id, op, path in rows
    ]


def fs_requests_give_back(*, requests: Sequence[FsRequest]) -> None:
    """Requests taken by a poll whose caller had gone: open again for its next poll."""
    with transaction.atomic():
        CaseFsRequest.objects.filter(
            pk__in=[ascii_int(r.request_id) for r in requests], answered_at__isnull=True
        ).update(taken_at=None)


def fs_request_answer(
    *,
    runner: Runner,
    job_id: int,
    lease_epoch: int,
    request_id: str,
    entries: Sequence[FsEntry] | None = None,
    blob: BlobRef | None = None,
    error: str | None = None,
) -> Ack:
    """The runner's answer: accepted only from the lease's current holder, for a request of
    that lease still open, naming a blob of the job's workspace within the artifact limit."""
    if sum(x is not None for x in (entries, blob, error)) != 1:
        return Ack(accepted=False, reason="answer with exactly one of entries, blob or error")
    pk = ascii_int(request_id)
    write = _answer_write(runner, job_id, lease_epoch, entries, error)
    # A listing or an error while the lease stands: one statement.
    if blob is None and pk is not None and write(pk, None):
        return Ack(accepted=True)
    workspace_id, why = lease_workspace(
        runner=runner, job_id=job_id, lease_epoch=lease_epoch, call="answer_case_fs_request"
    )
    if workspace_id is None:
        return Ack(accepted=False, reason=why)
    held = None
    if blob is not None:
        if blob.size > settings.EVERDICT_MAX_ARTIFACT_BYTES:
            return Ack(accepted=False, reason="the file is over max_artifact_bytes")
        held = blob_held(workspace=workspace_id, sha256=blob.sha256, size=blob.size)
        if held is None:
            return Ack(accepted=False, reason=f"blob {blob.sha256} was not uploaded")
    if pk is None or not write(pk, (held, blob.media_type if blob is not None else "")):
        return Ack(accepted=False, reason=f"no open request {request_id} for this lease")
    return Ack(accepted=True)


def fs_requests_post(*, runner: Runner, answers: Sequence[FsPosted]) -> list[Ack]:
    """Answers carried by a runner's poll (server feature `fs_answers`), each written as
    `fs_request_answer` writes it: a listing or an error, fenced alike."""
    return [
        fs_request_answer(
            runner=runner,
            job_id=answer.job_id,
            lease_epoch=answer.lease_epoch,
            request_id=answer.request_id,
            entries=answer.entries,
            error=answer.error,
        )
        for answer in answers
    ]


def _answer_write(
    runner: Runner,
    job_id: int,
    lease_epoch: int,
    entries: Sequence[FsEntry] | None,
    error: str | None,
) -> Callable[[int, tuple[Blob | None, str] | None], bool]:
    """Writes the answer to an open request of this lease while the runner holds it, and
    wakes the page waiting for it: one statement (its notification included on PostgreSQL).
    When the page waits in this process, the answer is handed to it instead and the row
    deleted by that statement (the page would delete it as it read it)."""

    def write(pk: int, blob: tuple[Blob | None, str] | None) -> bool:
        held, media_type = blob or (None, "")
        listing = [e.model_dump() for e in entries] if entries is not None else None
        error_text = (error or "")[:500]
        # Handed over only outside a transaction: the row is gone once the statement ends,
        # and the answer is handed before `handing` ends (see `FsWait.look`).
        if answers.waits_here(pk) and not connection.in_atomic_block:
            with answers.handing(pk):
                row = _delete_answered(pk, runner, job_id, lease_epoch)
                if row is not None:
                    answers.hand(pk, FsContent(*row, listing, held, media_type, error_text))
            return row is not None
        table = CaseFsRequest._meta.db_table
        notify = ""
        params: list[Any] = [
            connection.ops.adapt_datetimefield_value(timezone.now()),
            CaseFsRequest._meta.get_field("entries").get_db_prep_save(listing, connection),
            held.pk if held is not None else None,
            media_type,
            error_text,
            *_fence_params(pk, runner, job_id, lease_epoch),
        ]
        if on_postgres():
            notify = f", pg_notify(%s, id::text) IS NULL, {async_commit()}"
            params.append(FS_ANSWER_CHANNEL)
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET answered_at = %s, entries = %s, blob_id = %s, "
                f"media_type = %s, error = %s WHERE {_OPEN_FOR_LEASE} RETURNING id{notify}",
                params,
            )
            written = cursor.fetchone() is not None
        if written:
            transaction.on_commit(lambda: answers.wake([pk]))
        return written

    return write


# An open request of this lease, while the runner holds it (`_fence_params`).
_OPEN_FOR_LEASE = (
    "id = %s AND job_id = %s AND lease_epoch = %s AND answered_at IS NULL "
    f"AND EXISTS (SELECT 1 FROM {RunnerJob._meta.db_table} j WHERE j.id = %s "
    f"AND {holds_sql('j', 'default')})"
)


def _fence_params(pk: int, runner: Runner, job_id: int, lease_epoch: int) -> list[Any]:
    return [pk, job_id, lease_epoch, job_id, *holds_params(runner.pk, lease_epoch)]


def _delete_answered(
    pk: int, runner: Runner, job_id: int, lease_epoch: int
) -> tuple[str, str] | None:
    """The open request of this lease deleted, answered in memory: its (op, path)."""
    table = CaseFsRequest._meta.db_table
    sql = f"DELETE FROM {table} WHERE {_OPEN_FOR_LEASE} RETURNING op, path"
    if on_postgres():
        sql += f", {async_commit()}"
    with connection.cursor() as cursor:
        cursor.execute(sql, _fence_params(pk, runner, job_id, lease_epoch))
        row = cursor.fetchone()
    return (row[0], row[1]) if row is not None else None
