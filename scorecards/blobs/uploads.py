"""Uploads of blobs in chunks: what a workspace holds, and each chunk put where it resumes.

A chunk is accepted only at the offset the upload stands at (what the server holds): a retry
of the last chunk is answered as held, anything else is refused with the offset to resume
from. Chunks are staged in the blob storage and recorded on the upload's row by a
compare-and-set on `received`, so two replicas receiving the same chunk at once keep one.
On `final` the staged chunks are read back through SHA-256: bytes that do not hash to the
digest they were sent under are refused and nothing of them is kept; bytes that do are
committed as the blob, and the staging removed.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterable, Sequence
from typing import IO, TYPE_CHECKING

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import IntegrityError, transaction
from django.utils import timezone

from runnercli.protocol import BlobAck, BlobHoldings
from scorecards.blobs import metrics
from scorecards.blobs.models import Blob, BlobUpload
from scorecards.blobs.store import (
    DEFAULT_MEDIA_TYPE,
    blob_commit,
    blob_storage,
    chunk_key,
    workspace_id_of,
)

if TYPE_CHECKING:
    from scorecards.models import Workspace

# Staged chunks one upload may have: a runner sending tiny chunks is told to send larger ones.
MAX_UPLOAD_CHUNKS = 4096
COPY_CHUNK = 1 << 20
# What a commit keeps in memory before it spools to a temporary file.
SPOOL_BYTES = 4 << 20


def blob_holdings(*, workspace: Workspace | int, sha256s: Sequence[str]) -> BlobHoldings:
    """Which of these blobs the workspace lacks, and for those partly uploaded, how many
    bytes it holds (where their upload resumes)."""
    workspace_id = workspace_id_of(workspace)
    asked = list(dict.fromkeys(sha256s))
    held = set(
        Blob.objects.filter(workspace_id=workspace_id, sha256__in=asked).values_list(
            "sha256", flat=True
        )
    )
    missing = [sha for sha in asked if sha not in held]
    partial = dict(
        BlobUpload.objects.filter(workspace_id=workspace_id, sha256__in=missing)
        .filter(received__gt=0)
        .values_list("sha256", "received")
    )
    return BlobHoldings(missing=missing, partial=partial)


def blob_put(
    *, workspace: Workspace | int, sha256: str, offset: int, data: bytes, final: bool
) -> BlobAck:
    """Take one chunk of the blob at `offset`; on `final`, check the whole against its digest
    and commit it. `stored` says how many bytes of it the server holds after the call."""
    ack = _put(workspace_id_of(workspace), sha256, offset, data, final)
    metrics.BLOB_CHUNKS.labels(outcome="accepted" if ack.accepted else "refused").inc()
    return ack


def _put(workspace_id: int, sha256: str, offset: int, data: bytes, final: bool) -> BlobAck:
    held = Blob.objects.filter(workspace_id=workspace_id, sha256=sha256).first()
    if held is not None:
        # The workspace has these bytes (a retry of a final chunk, or another case's file).
        return BlobAck(accepted=True, stored=held.size)
    limit = settings.EVERDICT_MAX_ARTIFACT_BYTES
    if offset < 0 or offset + len(data) > limit:
        upload_discard(workspace_id, sha256)
        return BlobAck(
            accepted=False,
            reason=f"blob {sha256} is over the limit of {limit} bytes: nothing of it is kept",
        )
    upload = BlobUpload.objects.filter(workspace_id=workspace_id, sha256=sha256).first()
    ack = _append(workspace_id, sha256, upload, offset, data)
    if not ack.accepted or not final:
        return ack
    return _commit(workspace_id, sha256)


def _append(
    workspace_id: int, sha256: str, upload: BlobUpload | None, offset: int, data: bytes
) -> BlobAck:
    """Stage `data` at `offset` when that is where the upload stands."""
    received = upload.received if upload is not None else 0
    if offset != received:
        if upload is not None and _last_chunk_is(upload, offset, len(data)):
            return BlobAck(accepted=True, reason="already held", stored=received)
        return _misplaced(offset, received)
    if not data:
        return BlobAck(accepted=True, stored=received)
    chunks = upload.chunks if upload is not None else []
    if len(chunks) >= MAX_UPLOAD_CHUNKS:
        return BlobAck(
            accepted=False,
            reason=f"more than {MAX_UPLOAD_CHUNKS} chunks: send larger ones",
            stored=received,
        )
    storage = blob_storage()
    name = storage.save(chunk_key(workspace_id, sha256, offset), ContentFile(data))
    if _record(workspace_id, sha256, upload, name, len(data)):
        metrics.BLOB_BYTES.inc(len(data))
        return BlobAck(accepted=True, stored=offset + len(data))
    # Another call took this offset meanwhile (the same chunk sent twice at once).
    storage.delete(name)
    now = BlobUpload.objects.filter(workspace_id=workspace_id, sha256=sha256).first()
    if now is not None and _last_chunk_is(now, offset, len(data)):
        return BlobAck(accepted=True, reason="already held", stored=now.received)
    return _misplaced(offset, now.received if now is not None else 0)


def _misplaced(offset: int, received: int) -> BlobAck:
    return BlobAck(
        accepted=False,
        reason=f"offset {offset} is not where this upload stands: the server holds "
        f"{received} bytes of it; resume from there",
        stored=received,
    )


def _last_chunk_is(upload: BlobUpload, offset: int, size: int) -> bool:
    """Whether the upload's last chunk is one of `size` bytes at `offset` (a retry of it)."""
    return (
        bool(upload.chunks)
        and size > 0
        and upload.received == offset + size
        and (upload.chunks[-1][1] == size)
    )


def _record(
    workspace_id: int, sha256: str, upload: BlobUpload | None, name: str, size: int
) -> bool:
    """Add a staged chunk to the upload, compare-and-set on what it held; False when another
    call moved it first."""
    now = timezone.now()
    if upload is None:
        try:
            with transaction.atomic():
                BlobUpload.objects.create(
                    workspace_id=workspace_id,
                    sha256=sha256,
                    received=size,
                    chunks=[[name, size]],
                    created_at=now,
                    updated_at=now,
                )
        except IntegrityError:
            return False
        return True
    moved = BlobUpload.objects.filter(pk=upload.pk, received=upload.received).update(
        received=upload.received + size, chunks=[*upload.chunks, [name, size]], updated_at=now
    )
    return moved == 1


def _commit(workspace_id: int, sha256: str) -> BlobAck:
    """Read the staged chunks back through SHA-256; commit them as the blob when they hash to
    `sha256`, else keep nothing."""
    upload = BlobUpload.objects.filter(workspace_id=workspace_id, sha256=sha256).first()
    chunks = upload.chunks if upload is not None else []
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool:  # type: IO[bytes]
        try:
            digest, size = _assemble(chunks, spool)
        except Exception:
            # A chunk gone: another call committed the blob and removed the staging meanwhile.
            held = Blob.objects.filter(workspace_id=workspace_id, sha256=sha256).first()
            if held is not None:
                return BlobAck(accepted=True, stored=held.size)
            raise
        if digest != sha256:
            upload_discard(workspace_id, sha256)
            return BlobAck(
                accepted=False,
                reason=f"the bytes sent hash to {digest}, not {sha256}: nothing of them is kept",
            )
        spool.seek(0)
        blob_commit(
            workspace_id=workspace_id,
            sha256=sha256,
            content=spool,
            size=size,
            media_type=DEFAULT_MEDIA_TYPE,
        )
    upload_discard(workspace_id, sha256, chunks)
    metrics.BLOBS_COMMITTED.inc()
    return BlobAck(accepted=True, stored=size)


def _assemble(chunks: Iterable[Sequence[object]], out: IO[bytes]) -> tuple[str, int]:
    """Copy the staged chunks, in order, into `out`; their SHA-256 and size."""
    storage, digest, size = blob_storage(), hashlib.sha256(), 0
    for name, _ in chunks:
        with storage.open(str(name), "rb") as chunk:
            while piece := chunk.read(COPY_CHUNK):
                digest.update(piece)
                out.write(piece)
                size += len(piece)
    return digest.hexdigest(), size


def upload_discard(
    workspace_id: int, sha256: str, chunks: Iterable[Sequence[object]] | None = None
) -> None:
    """Forget an upload in progress and remove its staged chunks."""
    upload = BlobUpload.objects.filter(workspace_id=workspace_id, sha256=sha256).first()
    names = {str(name) for name, _ in (chunks or [])}
    if upload is not None:
        names.update(str(name) for name, _ in upload.chunks)
        BlobUpload.objects.filter(pk=upload.pk).delete()
    storage = blob_storage()
    for name in sorted(names):
        storage.delete(name)
