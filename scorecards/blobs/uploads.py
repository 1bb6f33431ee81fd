"""Uploads of blobs in chunks: what a workspace holds, and each chunk put where it resumes.

A chunk is accepted only at the offset the upload stands at (what the server holds): a retry
of the last chunk is answered as held, anything else is refused with the offset to resume
from. Chunks are staged in the blob storage and recorded on the upload's row by a
compare-and-set on `received`, so two replicas receiving the same chunk at once keep one.
On `final` the staged chunks, then the final chunk itself, are streamed through SHA-256 to
the blob's key: bytes that do not hash to the digest they were sent under are removed and
refused, and nothing of them is kept; bytes that do are recorded as the blob, and the
staging removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any, cast

from django.conf import settings
from django.core.files import File
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from runnercli.protocol import BlobAck, BlobHoldings
from scorecards.blobs import metrics
from scorecards.blobs.models import Blob, BlobUpload
from scorecards.blobs.receiving import Received
from scorecards.blobs.running import running_forget, running_keep, running_take
from scorecards.blobs.store import (
    DEFAULT_MEDIA_TYPE,
    Moved,
    blob_compose,
    blob_insert,
    blob_record,
    blob_storage,
    blob_write,
    chunk_key,
    workspace_id_of,
)

if TYPE_CHECKING:
    from scorecards.models import Workspace

# Staged chunks one upload may have: a runner sending tiny chunks is told to send larger ones.
MAX_UPLOAD_CHUNKS = 4096
COPY_CHUNK = 1 << 20

# A chunk's bytes: whole (a `put_blob` call's) or a seekable file read a piece at a time (a
# `PUT`'s body as the server spooled it), so that a chunk is never held whole in memory.
Chunk = bytes | IO[bytes]


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
    *, workspace: Workspace | int, sha256: str, offset: int, data: Chunk, final: bool
) -> BlobAck:
    """Take one chunk of the blob at `offset` (bytes, or a seekable file read from where it
    stands to its end); on `final`, check the whole against its digest and commit it.
    `stored` says how many bytes of it the server holds after the call."""
    ack = _put(workspace_id_of(workspace), sha256, offset, _file(data), final)
    metrics.BLOB_CHUNKS.labels(outcome="accepted" if ack.accepted else "refused").inc()
    return ack


def _file(data: Chunk) -> _Piece:
    """The chunk as a file from its first byte, with its length."""
    if isinstance(data, bytes):
        return _Piece(io.BytesIO(data), len(data))  # shares the bytes: no copy
    at = data.tell()
    size = data.seek(0, os.SEEK_END) - at
    data.seek(at)
    return _Piece(data, size, at)


class _Piece:
    """A chunk's bytes in a seekable file, `size` of them from `start`."""

    def __init__(self, file: IO[bytes], size: int, start: int = 0) -> None:
        self.file = file
        self.size = size
        self.start = start

    def pieces(self) -> Iterator[bytes]:
        """The bytes from the first, `COPY_CHUNK` at a time."""
        self.file.seek(self.start)
        left = self.size
        while left > 0:
            piece = self.file.read(min(COPY_CHUNK, left))
            if not piece:
                break
            left -= len(piece)
            yield piece

    def update(self, digest: Any) -> None:
        for piece in self.pieces():
            digest.update(piece)


def _put(workspace_id: int, sha256: str, offset: int, data: _Piece, final: bool) -> BlobAck:
    limit = settings.EVERDICT_MAX_ARTIFACT_BYTES
    if offset < 0 or offset + data.size > limit:
        upload_discard(workspace_id, sha256)
        return BlobAck(
            accepted=False,
            reason=f"blob {sha256} is over the limit of {limit} bytes: nothing of it is kept",
        )
    upload = BlobUpload.objects.filter(workspace_id=workspace_id, sha256=sha256).first()
    if upload is None or offset != upload.received:
        held = Blob.objects.filter(workspace_id=workspace_id, sha256=sha256).first()
        if held is not None:
            # The workspace has these bytes (a retry of a final chunk, another case's file).
            return BlobAck(accepted=True, stored=held.size)
    if final and offset == (upload.received if upload is not None else 0):
        # The last chunk goes straight into the blob, after the staged ones: staging it
        # would only write it to read it back.
        return _commit(workspace_id, sha256, tail=data)
    ack = _append(workspace_id, sha256, upload, offset, data)
    if not ack.accepted or not final:
        return ack
    return _commit(workspace_id, sha256)


def blob_put_received(
    *,
    workspace_id: int,
    sha256: str,
    offset: int,
    received: Received,
    upload: BlobUpload | None,
    final: bool,
) -> BlobAck:
    """Take one chunk a raw `PUT` received into `received`, at `offset` where the upload
    stood (`upload`, read before the body came). With the upload's digest carried over the
    chunk as it arrived, the chunk is kept as a staged chunk, or (the last chunk, the digest
    matching) as the blob after the staged chunks, and not hashed again; on a store on the
    local disk the file is moved into place (nothing is read back). Otherwise (a digest this
    process does not hold) as `blob_put` from the file."""
    limit = settings.EVERDICT_MAX_ARTIFACT_BYTES
    if received.digest is None or offset + received.size > limit:
        with received.open() as data:
            return blob_put(
                workspace=workspace_id, sha256=sha256, offset=offset, data=data, final=final
            )
    ack = (
        _commit_received(workspace_id, sha256, upload, received)
        if final
        else _stage_received(workspace_id, sha256, upload, offset, received)
    )
    metrics.BLOB_CHUNKS.labels(outcome="accepted" if ack.accepted else "refused").inc()
    return ack


def _chunks_full(upload: BlobUpload | None, stored: int) -> BlobAck | None:
    """The refusal of one more chunk to an upload that holds `MAX_UPLOAD_CHUNKS`, if it does."""
    if upload is not None and len(upload.chunks) >= MAX_UPLOAD_CHUNKS:
        return BlobAck(
            accepted=False,
            reason=f"more than {MAX_UPLOAD_CHUNKS} chunks: send larger ones",
            stored=stored,
        )
    return None


def _stage_received(
    workspace_id: int, sha256: str, upload: BlobUpload | None, offset: int, received: Received
) -> BlobAck:
    if (full := _chunks_full(upload, offset)) is not None:
        return full
    before = [str(chunk) for chunk, _ in upload.chunks] if upload is not None else []
    storage = blob_storage()
    with _content(received) as content:
        name = storage.save(chunk_key(workspace_id, sha256, offset), content)
    if _record(workspace_id, sha256, upload, name, received.size):
        metrics.BLOB_BYTES.inc(received.size)
        running_keep(workspace_id, sha256, [*before, name], received.digest)
        return BlobAck(accepted=True, stored=offset + received.size)
    storage.delete(name)
    now = BlobUpload.objects.filter(workspace_id=workspace_id, sha256=sha256).first()
    if now is not None and _last_chunk_is(now, offset, received.size):
        return BlobAck(accepted=True, reason="already held", stored=now.received)
    return _misplaced(offset, now.received if now is not None else 0)


def _commit_received(
    workspace_id: int, sha256: str, upload: BlobUpload | None, received: Received
) -> BlobAck:
    chunks = [str(name) for name, _ in upload.chunks] if upload is not None else []
    staged = sum(int(n) for _, n in upload.chunks) if upload is not None else 0
    size = staged + received.size
    metrics.BLOB_BYTES.inc(received.size)
    digest = received.hexdigest()
    if digest != sha256:
        upload_discard(workspace_id, sha256, chunks)
        return BlobAck(
            accepted=False,
            reason=f"the bytes sent hash to {digest}, not {sha256}: nothing of them is kept",
        )
    try:
        if chunks:
            saved = blob_compose(workspace_id, sha256, chunks, lambda: _file_pieces(received))
        else:
            with _content(received) as content:
                saved = blob_write(workspace_id, sha256, content)
    except FileNotFoundError:
        # A chunk gone: another call committed the blob and removed the staging meanwhile.
        held = Blob.objects.filter(workspace_id=workspace_id, sha256=sha256).first()
        if held is not None:
            return BlobAck(accepted=True, stored=held.size)
        raise
    blob_insert(
        workspace_id=workspace_id,
        sha256=sha256,
        size=size,
        media_type=DEFAULT_MEDIA_TYPE,
        saved=saved,
    )
    if upload is None:
        running_forget(workspace_id, sha256)  # one chunk, never staged: nothing to remove
    else:
        upload_discard(workspace_id, sha256, chunks)
    metrics.BLOBS_COMMITTED.inc()
    return BlobAck(accepted=True, stored=size)


@contextlib.contextmanager
def _content(received: Received) -> Iterator[File]:
    """The received bytes as a storage saves them: moved into place from the staging root on
    the local disk, else read from their file."""
    if received.path is not None:
        yield Moved(received.path)
        return
    with received.open() as data:
        yield File(data, name="chunk")


def _file_pieces(received: Received) -> Iterator[bytes]:
    with received.open() as file:
        while piece := file.read(COPY_CHUNK):
            yield piece


def _append(
    workspace_id: int, sha256: str, upload: BlobUpload | None, offset: int, data: _Piece
) -> BlobAck:
    """Stage `data` at `offset` when that is where the upload stands."""
    received = upload.received if upload is not None else 0
    if offset != received:
        if upload is not None and _last_chunk_is(upload, offset, data.size):
            return BlobAck(accepted=True, reason="already held", stored=received)
        return _misplaced(offset, received)
    if not data.size:
        return BlobAck(accepted=True, stored=received)
    if (full := _chunks_full(upload, received)) is not None:
        return full
    storage = blob_storage()
    name = storage.save(chunk_key(workspace_id, sha256, offset), _Pieces(data))
    if _record(workspace_id, sha256, upload, name, data.size):
        metrics.BLOB_BYTES.inc(data.size)
        _hash_staged(workspace_id, sha256, upload, name, data)
        return BlobAck(accepted=True, stored=offset + data.size)
    # Another call took this offset meanwhile (the same chunk sent twice at once).
    storage.delete(name)
    now = BlobUpload.objects.filter(workspace_id=workspace_id, sha256=sha256).first()
    if now is not None and _last_chunk_is(now, offset, data.size):
        return BlobAck(accepted=True, reason="already held", stored=now.received)
    return _misplaced(offset, now.received if now is not None else 0)


class _Pieces(File):
    """A chunk a storage writes in pieces of `COPY_CHUNK` (not Django's 64 KiB)."""

    def __init__(self, data: _Piece) -> None:
        super().__init__(data.file, name="chunk")
        self.data = data

    @property
    def size(self) -> int:
        return self.data.size

    def chunks(self, chunk_size: int | None = None) -> Iterator[bytes]:
        return self.data.pieces()


def _hash_staged(
    workspace_id: int, sha256: str, upload: BlobUpload | None, name: str, data: _Piece
) -> None:
    """Carry the upload's running digest over the chunk just staged, when this process
    holds it for the chunks staged before."""
    before = [str(chunk) for chunk, _ in upload.chunks] if upload is not None else []
    digest = running_take(workspace_id, sha256, before)
    if digest is not None:
        data.update(digest)
        running_keep(workspace_id, sha256, [*before, name], digest)


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
    with transaction.atomic():
        _lazy_commit()
        moved = BlobUpload.objects.filter(pk=upload.pk, received=upload.received).update(
            received=upload.received + size, chunks=[*upload.chunks, [name, size]], updated_at=now
        )
    return moved == 1


def _lazy_commit() -> None:
    """Let this transaction commit without waiting for its WAL to reach the disk (PostgreSQL).

    Only the record of a staged chunk is written so: should a crash lose it, the server holds
    a little less than it said, and the runner, asking where the upload stands before it
    resumes, sends that chunk again. The blob itself is recorded durably.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


def _commit(workspace_id: int, sha256: str, tail: _Piece | None = None) -> BlobAck:
    """Write the staged chunks and then `tail`, in order, to the blob's key and record the
    blob when they hash to `sha256`; else keep nothing of them. The upload's running digest,
    when this process holds it, is carried over `tail` as it is written beside the store,
    and checked before anything is put under the blob's key; without it the chunks are
    hashed as they are streamed."""
    tail = tail or _Piece(io.BytesIO(), 0)
    upload = BlobUpload.objects.filter(workspace_id=workspace_id, sha256=sha256).first()
    chunks = [str(name) for name, _ in upload.chunks] if upload is not None else []
    metrics.BLOB_BYTES.inc(tail.size)
    running = running_take(workspace_id, sha256, chunks)
    try:
        if running is not None:
            hashing = _Hashing(running, tail)
            size = sum(int(n) for _, n in (upload.chunks if upload else [])) + tail.size
            saved = blob_compose(
                workspace_id, sha256, chunks, hashing.pieces, lambda: hashing.matches(sha256)
            )
            digest = hashing.hexdigest()
        else:
            reader = _Chunks(chunks, tail)
            saved = blob_write(workspace_id, sha256, File(cast(IO[bytes], reader), name=sha256))
            digest, size = reader.digest.hexdigest(), reader.size
    except Exception:
        # A chunk gone: another call committed the blob and removed the staging meanwhile.
        held = Blob.objects.filter(workspace_id=workspace_id, sha256=sha256).first()
        if held is not None:
            return BlobAck(accepted=True, stored=held.size)
        raise
    if digest != sha256:
        if saved:
            blob_storage().delete(saved)
        upload_discard(workspace_id, sha256, chunks)
        return BlobAck(
            accepted=False,
            reason=f"the bytes sent hash to {digest}, not {sha256}: nothing of them is kept",
        )
    blob_record(
        workspace_id=workspace_id,
        sha256=sha256,
        size=size,
        media_type=DEFAULT_MEDIA_TYPE,
        saved=saved,
    )
    if upload is None and not chunks:
        running_forget(workspace_id, sha256)  # one chunk, never staged: nothing to remove
    else:
        upload_discard(workspace_id, sha256, chunks)
    metrics.BLOBS_COMMITTED.inc()
    return BlobAck(accepted=True, stored=size)


class _Hashing:
    """A running digest carried over `tail`: as its pieces are read to be written, or all of
    it first when `matches` is asked before (a store that writes only what matched)."""

    def __init__(self, running: Any, tail: _Piece) -> None:
        self._running = running
        self._tail = tail
        self._hashed = False

    def pieces(self) -> Iterator[bytes]:
        for piece in self._tail.pieces():
            if not self._hashed:
                self._running.update(piece)
            yield piece
        self._hashed = True

    def matches(self, sha256: str) -> bool:
        if not self._hashed:
            self._tail.update(self._running)
            self._hashed = True
        return self.hexdigest() == sha256

    def hexdigest(self) -> str:
        return str(self._running.hexdigest())


class _Chunks(io.RawIOBase):
    """The staged chunks read one after the other as one stream, hashed as they are read."""

    def __init__(self, names: list[str], tail: _Piece) -> None:
        super().__init__()
        self.names = list(names)
        self._tail = tail
        self._tail.file.seek(tail.start)
        self._left = tail.size
        self.digest = hashlib.sha256()
        self.size = 0
        self._open: IO[bytes] | None = None

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        """Up to `size` bytes (all that is left when `size` < 0), across chunk boundaries:
        short only at the end, as a reader such as boto3's takes a short read for the end."""
        want = size if size is not None and size >= 0 else None
        parts: list[bytes] = []
        got = 0
        while want is None or got < want:
            piece = self._piece(COPY_CHUNK if want is None else want - got)
            if not piece:
                break
            parts.append(piece)
            got += len(piece)
        data = b"".join(parts)
        self.digest.update(data)
        self.size += len(data)
        return data

    def _piece(self, size: int) -> bytes:
        """At most `size` bytes of the current chunk (the next one when it is done)."""
        while True:
            if self._open is None:
                if not self.names:
                    piece = self._tail.file.read(min(size, self._left))
                    self._left -= len(piece)
                    return piece
                self._open = blob_storage().open(self.names.pop(0), "rb")
            piece = self._open.read(size)
            if piece:
                return bytes(piece)
            self._open.close()
            self._open = None

    def close(self) -> None:
        if self._open is not None:
            self._open.close()
            self._open = None
        super().close()


def upload_discard(workspace_id: int, sha256: str, chunks: Iterable[str] = ()) -> None:
    """Forget an upload in progress and remove its staged chunks (those it records, and
    `chunks` read from it before)."""
    running_forget(workspace_id, sha256)
    upload = BlobUpload.objects.filter(workspace_id=workspace_id, sha256=sha256).first()
    names = set(chunks)
    if upload is not None:
        names.update(str(name) for name, _ in upload.chunks)
        BlobUpload.objects.filter(pk=upload.pk).delete()
    storage = blob_storage()
    for name in sorted(names):
        storage.delete(name)
