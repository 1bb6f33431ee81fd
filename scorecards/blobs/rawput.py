"""Raw uploads (feature `raw_upload`): a blob's bytes by plain HTTP `PUT`s beside the MCP call.

`begin_upload` (a runner tool, fenced by the lease) mints a signed, short-lived upload URL bound
to the runner, the job and its lease epoch, the workspace, the blob's digest and size.
`begin_uploads` mints the URLs of several blobs in one call. Each `PUT` to one carries one chunk
(`Content-Range: bytes a-b/size`, at most `EVERDICT_UPLOAD_CHUNK_BYTES`); it is checked against
the URL and the lease again, then taken by the same staging as `put_blob` (`uploads.blob_put`):
each chunk is staged before the next is taken, the last one commits the blob only if the whole
hashes to the digest. A `HEAD` says where the upload stands, so a runner whose connection
dropped (or whose server restarted) goes on from there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from django.conf import settings
from django.core import signing
from django.db import connections
from django.db.models import Model

from core import prebuilt
from core.errors import Conflict, Invalid
from runnercli.protocol import BlobAck, UploadGrant
from runners.models import Runner, RunnerJob
from runners.services import runner_authenticate
from scorecards.blobs import metrics
from scorecards.blobs.fence import (
    held_job_params,
    held_job_sql,
    held_workspace,
    lease_workspace,
)
from scorecards.blobs.models import Blob, BlobUpload
from scorecards.blobs.receiving import Received
from scorecards.blobs.running import running_copy
from scorecards.blobs.uploads import blob_put_received, upload_discard

SALT = "everdict.blobs.rawput"
UPLOAD_PATH = "/uploads/"


@dataclass(frozen=True)
class UploadClaims:
    """What an upload URL is good for."""

    runner_id: int
    job_id: int
    lease_epoch: int
    workspace_id: int
    sha256: str
    size: int


class UploadRefusal(Exception):
    """A `PUT` or `HEAD` refused: `status` is the HTTP status, the message its reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def upload_token(claims: UploadClaims, *, signer: signing.TimestampSigner | None = None) -> str:
    """The signed token naming `claims` (the upload URL's last segment)."""
    signer = signer or signing.TimestampSigner(salt=SALT)
    return signer.sign_object(
        [
            claims.runner_id,
            claims.job_id,
            claims.lease_epoch,
            claims.workspace_id,
            claims.sha256,
            claims.size,
        ],
        compress=True,
    )


def upload_claims(token: str) -> UploadClaims:
    """What a token is good for; refused when it is not one of this server's, or expired."""
    try:
        raw: Any = signing.TimestampSigner(salt=SALT).unsign_object(
            token, max_age=settings.EVERDICT_UPLOAD_URL_TTL_S
        )
    except signing.SignatureExpired as exc:
        raise UploadRefusal(410, f"this upload URL has expired ({exc}): ask for another") from exc
    except signing.BadSignature as exc:
        raise UploadRefusal(403, "this is not an upload URL this server issued") from exc
    runner_id, job_id, lease_epoch, workspace_id, sha256, size = raw
    return UploadClaims(
        runner_id=runner_id,
        job_id=job_id,
        lease_epoch=lease_epoch,
        workspace_id=workspace_id,
        sha256=sha256,
        size=size,
    )


def held_of(workspace_id: int, sha256: str, size: int) -> tuple[int, bool]:
    """How many bytes of the blob the workspace holds, and whether it is committed."""
    return helds_of(workspace_id, [(sha256, size)])[sha256]


def helds_of(workspace_id: int, blobs: Sequence[tuple[str, int]]) -> dict[str, tuple[int, bool]]:
    """For each blob `(sha256, size)`, the bytes the workspace holds of it and whether it is
    committed (two statements, however many blobs)."""
    sha256s = [sha256 for sha256, _ in blobs]
    sizes = dict(
        Blob.objects.filter(workspace_id=workspace_id, sha256__in=sha256s).values_list(
            "sha256", "size"
        )
    )
    missing = [sha256 for sha256 in sha256s if sha256 not in sizes]
    received = dict(
        BlobUpload.objects.filter(workspace_id=workspace_id, sha256__in=missing).values_list(
            "sha256", "received"
        )
        if missing
        else []
    )
    return {sha256: _held(sizes.get(sha256), received.get(sha256), size) for sha256, size in blobs}


def _held(committed: int | None, received: int | None, size: int) -> tuple[int, bool]:
    """Where a blob of `size` bytes stands: its committed size, else the bytes received."""
    if committed is not None:
        return committed, True
    return min(received or 0, size), False


def upload_begin(
    *, runner: Runner, job_id: int, lease_epoch: int, sha256: str, size: int
) -> UploadGrant:
    """`begin_upload`: an upload URL for `size` bytes hashing to `sha256`, for the job's
    workspace, and where the upload stands (a Conflict when the runner does not hold the
    job; Invalid when the size is over the server's limit)."""
    [grant] = uploads_begin(
        runner=runner,
        job_id=job_id,
        lease_epoch=lease_epoch,
        blobs=[(sha256, size)],
        call="begin_upload",
    )
    if not grant.accepted:
        raise Invalid(grant.reason)
    return grant


def uploads_begin(
    *,
    runner: Runner,
    job_id: int,
    lease_epoch: int,
    blobs: Sequence[tuple[str, int]],
    call: str = "begin_uploads",
) -> list[UploadGrant]:
    """`begin_uploads`: an upload grant per blob `(sha256, size)`, in order, after one check
    of the lease (a Conflict when the runner does not hold the job); a blob over the
    server's limit gets a grant refused with the reason."""
    limit = settings.EVERDICT_MAX_ARTIFACT_BYTES
    asked = [(sha256, size) for sha256, size in blobs if size <= limit]
    standing = _begin_standing(runner, job_id, lease_epoch, asked)
    if standing is None:
        workspace_id, why = lease_workspace(
            runner=runner, job_id=job_id, lease_epoch=lease_epoch, call=call
        )
        if workspace_id is None:
            raise Conflict(why)
        held = helds_of(workspace_id, asked)
    else:
        workspace_id, held = standing
    signer = signing.TimestampSigner(salt=SALT)
    grants = []
    for sha256, size in blobs:
        if size > limit:
            reason = f"blob {sha256} is {size} bytes, over the limit of {limit}"
            grants.append(UploadGrant(accepted=False, reason=reason, size=size))
            continue
        claims = UploadClaims(
            runner_id=runner.pk,
            job_id=job_id,
            lease_epoch=lease_epoch,
            workspace_id=workspace_id,
            sha256=sha256,
            size=size,
        )
        offset, committed = held[sha256]
        grants.append(
            UploadGrant(
                accepted=True,
                url=f"{UPLOAD_PATH}{upload_token(claims, signer=signer)}",
                offset=offset,
                size=size,
                chunk_bytes=settings.EVERDICT_UPLOAD_CHUNK_BYTES,
                expires_in_s=settings.EVERDICT_UPLOAD_URL_TTL_S,
                committed=committed,
            )
        )
    metrics.UPLOAD_URLS.inc(sum(1 for grant in grants if grant.accepted))
    return grants


def _begin_standing(
    runner: Runner, job_id: int, lease_epoch: int, blobs: Sequence[tuple[str, int]]
) -> tuple[int, dict[str, tuple[int, bool]]] | None:
    """When the runner holds the job at this epoch: the job's workspace and where each blob
    `(sha256, size)` stands in it, in one statement; None when not (the fence then says why,
    or takes a lapsed lease back)."""
    if not blobs:
        workspace_id = held_workspace(runner, job_id, lease_epoch)
        return None if workspace_id is None else (workspace_id, {})
    alias = RunnerJob.objects.db
    sha256s = [sha256 for sha256, _ in blobs]
    params = [*sha256s, *held_job_params(runner, job_id, lease_epoch)]
    with prebuilt.cursor(alias) as cursor:
        cursor.execute(_begin_sql(alias, len(sha256s)), params)
        rows = cursor.fetchall()
    if not rows:
        return None
    standing = {sha256: (committed, received) for _, sha256, committed, received in rows}
    held = {sha256: _held(*standing.get(sha256, (None, None)), size) for sha256, size in blobs}
    return int(rows[0][0]), held


@cache
def _begin_sql(alias: str, count: int) -> str:
    """`_begin_standing`'s statement for `count` blobs (one or more): a row per blob, each
    with the job's workspace, the blob's committed size and the bytes its upload received
    (NULL where there is none)."""
    held = held_job_sql(alias)
    blob, upload = prebuilt.table(Blob, alias), prebuilt.table(BlobUpload, alias)

    def col(model: type[Model], name: str) -> str:
        return prebuilt.column(model, name, alias)

    values = ", ".join(["(%s)"] * count)
    return (
        f"WITH asked (sha256) AS (VALUES {values}) "
        f"SELECT {held.workspace}, a.sha256, b.{col(Blob, 'size')}, "
        f"u.{col(BlobUpload, 'received')} FROM {held.tables} CROSS JOIN asked a "
        f"LEFT JOIN {blob} b ON b.{col(Blob, 'workspace')} = {held.workspace} "
        f"AND b.{col(Blob, 'sha256')} = a.sha256 "
        f"LEFT JOIN {upload} u ON u.{col(BlobUpload, 'workspace')} = {held.workspace} "
        f"AND u.{col(BlobUpload, 'sha256')} = a.sha256 "
        f"WHERE {held.condition}"
    )


def upload_fenced(runner: Runner, claims: UploadClaims) -> int:
    """The workspace the upload is for, once the runner is the one the URL was issued to and
    still holds the job at the URL's epoch."""
    if runner.pk != claims.runner_id:
        raise UploadRefusal(403, "this upload URL was issued to another runner")
    workspace_id, why = lease_workspace(
        runner=runner, job_id=claims.job_id, lease_epoch=claims.lease_epoch, call="upload"
    )
    if workspace_id is None:
        raise UploadRefusal(409, why)
    if workspace_id != claims.workspace_id:
        raise UploadRefusal(409, "this upload URL names another workspace than the job's")
    return workspace_id


def upload_state(runner: Runner, claims: UploadClaims) -> tuple[int, bool]:
    """`HEAD`: where the upload stands (bytes held, committed)."""
    workspace_id = upload_fenced(runner, claims)
    metrics.UPLOAD_HEADS.inc()
    return held_of(workspace_id, claims.sha256, claims.size)


def content_range(header: str, size: int) -> tuple[int, int]:
    """The `[first, last]` bytes a `Content-Range: bytes a-b/size` names, checked against the
    URL's size."""
    unit, _, spec = header.strip().partition(" ")
    span, _, total = spec.partition("/")
    first, _, last = span.partition("-")
    try:
        if unit != "bytes":
            raise ValueError
        a, b, n = int(first), int(last), int(total)
    except ValueError as exc:
        raise UploadRefusal(
            400, f"Content-Range {header!r} is not 'bytes first-last/size'"
        ) from exc
    if n != size:
        raise UploadRefusal(400, f"Content-Range names {n} bytes; this upload URL is for {size}")
    if a < 0 or b < a:
        raise UploadRefusal(400, f"Content-Range {header!r} is not a range of bytes")
    if b >= size:
        raise UploadRefusal(416, f"Content-Range {header!r} goes past the blob's {size} bytes")
    most = settings.EVERDICT_UPLOAD_CHUNK_BYTES
    if b - a + 1 > most:
        raise UploadRefusal(413, f"a chunk is at most {most} bytes")
    return a, b


def upload_drop(runner: Runner, claims: UploadClaims) -> None:
    """Remove what the upload staged (a chunk that was not what it said), when the URL is
    the runner's and its lease holds."""
    workspace_id = upload_fenced(runner, claims)
    if not Blob.objects.filter(workspace_id=workspace_id, sha256=claims.sha256).exists():
        upload_discard(workspace_id, claims.sha256)


def runner_of(bearer: str) -> Runner:
    """The runner whose token this is (401 when it is none)."""
    runner: Runner | None = runner_authenticate(bearer)
    if runner is None:
        raise UploadRefusal(401, "a runner's token is required (Authorization: Bearer rnr_…)")
    return runner


@dataclass
class Opened:
    """A chunk's `PUT` let in, before its body is read: where the upload stood."""

    workspace_id: int
    upload: BlobUpload | None
    final: bool
    # The upload's digest so far, to carry over the chunk as it arrives (None: this process
    # does not hold it, and the chunk is hashed when the blob is committed).
    digest: Any | None
    # A retry of the chunk last staged: answered as held, `(offset, committed)`.
    held: tuple[int, bool] | None = None


def upload_open(bearer: str, claims: UploadClaims, first: int, length: int) -> Opened:
    """Let in a `PUT` of `length` bytes at `first` before its body is read: the runner's
    token, then in one statement the URL's and the lease's fence, the blob not committed yet
    and where the upload stands (the fence's own statements, and a lapsed lease taken back,
    when the runner does not hold the job as the URL says); the chunk must start there.
    Refused with the reason."""
    runner = runner_of(bearer)
    standing = _standing(runner, claims)
    if standing is None:
        workspace_id = upload_fenced(runner, claims)
        committed = Blob.objects.filter(workspace_id=workspace_id, sha256=claims.sha256).exists()
        upload = (
            None
            if committed
            else BlobUpload.objects.filter(workspace_id=workspace_id, sha256=claims.sha256).first()
        )
    else:
        workspace_id = claims.workspace_id
        committed, upload = standing
    if committed:
        raise UploadRefusal(
            409, f"blob {claims.sha256} is committed already: this URL takes no more bytes"
        )
    received = upload.received if upload is not None else 0
    opened = Opened(
        workspace_id=workspace_id,
        upload=upload,
        final=first + length == claims.size,
        digest=None,
    )
    if first != received:
        if upload is not None and _retry_of_last(upload, first, length):
            opened.held = (received, False)
            return opened
        raise UploadRefusal(
            409,
            f"offset {first} is not where this upload stands: the server holds "
            f"{received} bytes of it; resume from there",
        )
    names = [str(name) for name, _ in upload.chunks] if upload is not None else []
    opened.digest = running_copy(workspace_id, claims.sha256, names)
    return opened


def _standing(runner: Runner, claims: UploadClaims) -> tuple[bool, BlobUpload | None] | None:
    """When the runner is the URL's and holds the job at the URL's epoch, in the URL's
    workspace: whether the blob is committed, and the upload's row (one statement); None when
    not (the fence then says why, or takes a lapsed lease back)."""
    if runner.pk != claims.runner_id:
        return None
    alias = RunnerJob.objects.db
    with connections[alias].cursor() as cursor:
        cursor.execute(
            _standing_sql(alias),
            [
                claims.workspace_id,
                claims.sha256,
                claims.workspace_id,
                claims.sha256,
                *held_job_params(runner, claims.job_id, claims.lease_epoch),
                claims.workspace_id,
            ],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    upload = (
        None if row[1] is None else prebuilt.columns(BlobUpload, alias).instance(alias, row[1:])
    )
    return bool(row[0]), upload


@cache
def _standing_sql(alias: str) -> str:
    held = held_job_sql(alias)
    blob, upload = prebuilt.table(Blob, alias), prebuilt.table(BlobUpload, alias)

    def col(model: type[Model], name: str) -> str:
        return prebuilt.column(model, name, alias)

    uploads = ", ".join(prebuilt.columns(BlobUpload, alias).select("u", alias))
    return (
        f"SELECT EXISTS (SELECT 1 FROM {blob} b WHERE b.{col(Blob, 'workspace')} = %s "
        f"AND b.{col(Blob, 'sha256')} = %s), {uploads} "
        f"FROM {held.tables} "
        f"LEFT JOIN {upload} u ON u.{col(BlobUpload, 'workspace')} = %s "
        f"AND u.{col(BlobUpload, 'sha256')} = %s "
        f"WHERE {held.condition} AND {held.workspace} = %s"
    )


def _retry_of_last(upload: BlobUpload, first: int, length: int) -> bool:
    return (
        bool(upload.chunks)
        and upload.received == first + length
        and int(upload.chunks[-1][1]) == length
    )


def upload_take(
    claims: UploadClaims, opened: Opened, first: int, received: Received
) -> tuple[int, bool]:
    """Keep the chunk received for an upload let in by `upload_open`, then close its file:
    the bytes held after it and whether the blob is committed. Refused (nothing of the upload
    kept where the chunk was bad) with the reason."""
    try:
        received.done()
        ack: BlobAck = blob_put_received(
            workspace_id=opened.workspace_id,
            sha256=claims.sha256,
            offset=first,
            received=received,
            upload=opened.upload,
            final=opened.final,
        )
    finally:
        received.close()
    if not ack.accepted:
        raise UploadRefusal(422 if "hash to" in ack.reason else 409, ack.reason or "refused")
    return ack.stored, opened.final


def upload_abandon(claims: UploadClaims, opened: Opened) -> None:
    """Remove what an upload let in by `upload_open` staged (its chunk was not what it said)."""
    if not Blob.objects.filter(workspace_id=opened.workspace_id, sha256=claims.sha256).exists():
        upload_discard(opened.workspace_id, claims.sha256)
