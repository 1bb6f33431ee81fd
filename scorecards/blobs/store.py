"""Where blobs' bytes live: `STORAGES["blobs"]` (a directory under var/ by default, any
django-storages backend in production), under keys derived from the workspace and the digest.

Committed blobs are at `blobs/<workspace>/<aa>/<sha256>`; chunks of an upload in progress are
staged beside them at `uploads/<workspace>/<sha256>/<offset>-<token>`, in the same storage, so
that replicas sharing it resume each other's uploads.
"""

from __future__ import annotations

import hashlib
import io
import secrets
from typing import TYPE_CHECKING, Any

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
