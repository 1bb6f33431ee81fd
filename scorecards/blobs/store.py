"""Where blobs' bytes live: `STORAGES["blobs"]` (a directory under var/ by default, any
django-storages backend in production), under keys derived from the workspace and the digest.

Committed blobs are at `blobs/<workspace>/<aa>/<sha256>`; chunks of an upload in progress are
staged beside them at `uploads/<workspace>/<sha256>/<offset>-<token>`, in the same storage, so
that replicas sharing it resume each other's uploads.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TYPE_CHECKING, Any, cast

from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import Storage, storages
from django.db import IntegrityError, transaction

from core.errors import NotFound
from scorecards.blobs.models import Blob

if TYPE_CHECKING:
    from scorecards.models import Workspace

DEFAULT_MEDIA_TYPE = "application/octet-stream"
STAGING_ROOT = "uploads"


def workspace_id_of(workspace: Workspace | int) -> int:
    return workspace if isinstance(workspace, int) else int(workspace.pk)


def blob_storage() -> Storage:
    return storages["blobs"]


def blob_key(workspace_id: int, sha256: str) -> str:
    return f"blobs/{workspace_id}/{sha256[:2]}/{sha256}"


def staging_dir(workspace_id: int, sha256: str) -> str:
    return f"{STAGING_ROOT}/{workspace_id}/{sha256}"


def chunk_key(workspace_id: int, sha256: str, offset: int) -> str:
    # The token keeps two replicas receiving the same chunk at once from writing one object.
    return f"{staging_dir(workspace_id, sha256)}/{offset:012d}-{secrets.token_hex(6)}"


def storage_backend() -> str:
    """The blob storage's class, as the workspace page shows it."""
    backend = blob_storage()
    return f"{type(backend).__module__}.{type(backend).__qualname__}"


def blob_write(workspace_id: int, sha256: str, content: File) -> str:
    """Write bytes under the blob's key; the name the storage kept them under."""
    return blob_storage().save(blob_key(workspace_id, sha256), content)


def blob_compose(
    workspace_id: int,
    sha256: str,
    names: Sequence[str],
    tail: Callable[[], Iterator[bytes]],
    matches: Callable[[], bool] = lambda: True,
) -> str:
    """Write the staged chunks `names` and then the pieces `tail()` yields under the blob's
    key once `matches()` says they hash to the digest; the name the storage kept them under
    ("" when they did not: nothing is kept). A storage on the local disk has the chunks
    copied by the kernel and the tail written piece by piece into a file that is then moved
    into place, `matches()` asked between the two (a digest carried over the tail's pieces as
    they are written); any other storage asks first."""
    storage = blob_storage()
    try:
        root = storage.path(STAGING_ROOT)
    except NotImplementedError:
        if not matches():
            return ""
        return blob_write(
            workspace_id, sha256, File(cast(IO[bytes], _Concat(names, tail)), name=sha256)
        )
    os.makedirs(root, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=root, prefix="commit-", delete=False) as out:
        try:
            for name in names:
                with open(storage.path(name), "rb") as part:
                    _copy_file(part, out)
            for piece in tail():
                out.write(piece)
            out.flush()
            if not matches():
                return ""
            return blob_write(workspace_id, sha256, _Composed(out, name=sha256))
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(out.name)


class Moved(File):
    """A file already on the storage's disk (at `path`), that the storage moves into place."""

    def __init__(self, path: str) -> None:
        super().__init__(None, name=os.path.basename(path))
        self._path = path

    def temporary_file_path(self) -> str:
        return self._path

    @property
    def size(self) -> int:
        return os.path.getsize(self._path)

    def close(self) -> None:
        pass


class _Composed(File):
    """A file on the storage's disk that the storage moves into place rather than copies."""

    def temporary_file_path(self) -> str:
        return str(getattr(self.file, "name", ""))


def _copy_file(source: IO[bytes], target: IO[bytes]) -> None:
    """Append all of `source` to `target` inside the kernel where it can."""
    target.flush()
    try:
        while os.copy_file_range(source.fileno(), target.fileno(), COPY_BUFFER * 16):
            pass
    except OSError:
        shutil.copyfileobj(source, target, COPY_BUFFER)


class _Concat(io.RawIOBase):
    """Staged chunks, then the tail, read one after the other as one stream."""

    def __init__(self, names: Sequence[str], tail: Callable[[], Iterator[bytes]]) -> None:
        super().__init__()
        self._names = list(names)
        self._tail = tail
        self._pieces: Iterator[bytes] | None = None
        self._piece = memoryview(b"")
        self._open: IO[bytes] | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while True:
            if self._open is None:
                if not self._names:
                    return self._tail_into(buffer)
                self._open = cast(IO[bytes], blob_storage().open(self._names.pop(0), "rb"))
            got = self._open.readinto(buffer)  # type: ignore[attr-defined]
            if got:
                return int(got)
            self._open.close()
            self._open = None

    def _tail_into(self, buffer: Any) -> int:
        """Fill `buffer` from the tail's pieces (0 at their end)."""
        if self._pieces is None:
            self._pieces = self._tail()
        while not self._piece:
            piece = next(self._pieces, None)
            if piece is None:
                return 0
            self._piece = memoryview(piece)
        n = min(len(buffer), len(self._piece))
        buffer[:n] = self._piece[:n]
        self._piece = self._piece[n:]
        return n

    def close(self) -> None:
        if self._open is not None:
            self._open.close()
            self._open = None
        super().close()


def blob_record(*, workspace_id: int, sha256: str, size: int, media_type: str, saved: str) -> Blob:
    """Record verified bytes written at `saved` as the workspace's blob (once, however many
    callers commit the same bytes at the same time)."""
    try:
        with transaction.atomic():
            blob, created = Blob.objects.get_or_create(
                workspace_id=workspace_id,
                sha256=sha256,
                defaults={"size": size, "media_type": media_type, "key": saved},
            )
    except IntegrityError:
        blob, created = Blob.objects.get(workspace_id=workspace_id, sha256=sha256), False
    if not created and blob.key != saved:
        # A backend that renames on save kept a second copy: the first one stands.
        blob_storage().delete(saved)
    return blob


def blob_insert(*, workspace_id: int, sha256: str, size: int, media_type: str, saved: str) -> Blob:
    """`blob_record` for bytes the workspace was not known to hold: one INSERT, and only when
    another call recorded them meanwhile, the row it made (and `saved` removed if it differs)."""
    # Outside a transaction the INSERT is one of its own (no BEGIN and COMMIT around it);
    # inside one, a savepoint keeps a conflict from breaking it.
    inside = transaction.get_connection().in_atomic_block
    try:
        with transaction.atomic() if inside else contextlib.nullcontext():
            return Blob.objects.create(
                workspace_id=workspace_id,
                sha256=sha256,
                size=size,
                media_type=media_type,
                key=saved,
            )
    except IntegrityError:
        return blob_record(
            workspace_id=workspace_id, sha256=sha256, size=size, media_type=media_type, saved=saved
        )


def blob_store(
    *, workspace: Workspace | int, data: bytes, media_type: str = DEFAULT_MEDIA_TYPE
) -> Blob:
    """Keep whole bytes the server itself has (a screen frame) as a blob of the workspace;
    the blob already held when the workspace has these bytes."""
    workspace_id = workspace_id_of(workspace)
    sha256 = hashlib.sha256(data).hexdigest()
    held = Blob.objects.filter(workspace_id=workspace_id, sha256=sha256).first()
    if held is not None:
        return held
    saved = blob_write(workspace_id, sha256, ContentFile(data))
    return blob_record(
        workspace_id=workspace_id,
        sha256=sha256,
        size=len(data),
        media_type=media_type,
        saved=saved,
    )


def blob_get(*, workspace: Workspace | int, sha256: str) -> Blob:
    """The workspace's blob of this digest; NotFound when it holds none."""
    blob = Blob.objects.filter(workspace_id=workspace_id_of(workspace), sha256=sha256).first()
    if blob is None:
        raise NotFound(f"No blob {sha256} in this workspace.")
    return blob


def blob_held(*, workspace: Workspace | int, sha256: str, size: int) -> Blob | None:
    """The workspace's blob of this digest, when it holds one of this size."""
    blob = Blob.objects.filter(workspace_id=workspace_id_of(workspace), sha256=sha256).first()
    return blob if blob is not None and blob.size == size else None


def blob_open(blob: Blob) -> File:
    """The blob's bytes, open for reading (the caller closes it). On an S3 store, the
    object's body as a stream: `storage.open()` would download all of it before the first
    read returns."""
    storage = blob_storage()
    bucket = getattr(storage, "bucket", None)
    normalize = getattr(storage, "_normalize_name", None)
    if bucket is not None and normalize is not None:
        body = bucket.Object(normalize(blob.key)).get()["Body"]
        return File(io.BufferedReader(_Body(body), buffer_size=COPY_BUFFER), name=blob.key)
    return storage.open(blob.key, "rb")


# What one read of a streamed body asks the store's connection for.
COPY_BUFFER = 1024 * 1024


class _Body(io.RawIOBase):
    """An S3 object's streaming body as a raw stream (read as it is asked for)."""

    def __init__(self, body: Any) -> None:
        super().__init__()
        self.body = body

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.body.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self.body.close()
        super().close()
