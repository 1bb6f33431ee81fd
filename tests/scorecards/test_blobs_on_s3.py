"""The blob store's uploads on an S3-compatible object store (SeaweedFS's S3 gateway)."""

from __future__ import annotations

import hashlib
import os
from datetime import timedelta
from typing import Any

import pytest
from django.core.files.base import ContentFile
from django.utils import timezone
from storages.backends.s3 import S3File

from scorecards.blobs.gc import blobs_gc
from scorecards.blobs.models import Blob, BlobUpload
from scorecards.blobs.services import blob_get, blob_open, blob_put, blob_store
from scorecards.blobs.store import blob_storage
from tests.scorecards.test_blobs_gc import named_by_a_result, sha
from tests.suites import suite

pytestmark = [pytest.mark.django_db, pytest.mark.s3]

MIB = 1024 * 1024


def upload(workspace: Any, data: bytes, chunk: int) -> Any:
    """Send `data` in chunks as a runner does; the last answer."""
    digest, offset = hashlib.sha256(data).hexdigest(), 0
    while True:
        piece = data[offset : offset + chunk]
        final = offset + len(piece) >= len(data)
        ack = blob_put(workspace=workspace, sha256=digest, offset=offset, data=piece, final=final)
        offset += len(piece)
        if final or not ack.accepted:
            return ack


def test_a_blob_of_three_chunks_is_kept_on_an_object_store(workspace: Any, s3_blobs: Any) -> None:
    data = os.urandom(3 * MIB)

    ack = upload(workspace, data, MIB)

    assert ack.accepted, ack.reason
    with blob_open(blob_get(workspace=workspace, sha256=hashlib.sha256(data).hexdigest())) as h:
        # The object's body streamed, not downloaded whole before the first read.
        assert not isinstance(h, S3File)
        assert h.read(10) == data[:10]
        assert h.read() == data[10:]


def test_garbage_collection_removes_from_the_object_store_what_nobody_names(
    alice: Any, workspace: Any, s3_blobs: Any
) -> None:
    """A day on (`now` given, the store's clock untouched): the blob nobody names goes, the
    one a result names stays and still reads back, a stale upload's staged chunks and a
    staged chunk no upload records go; nothing else is left in the bucket."""
    suite(alice, cases=1)
    named_by_a_result(alice, workspace, b"an artifact")
    kept = Blob.objects.get(sha256=sha(b"an artifact"))
    orphan = blob_store(workspace=workspace, data=b"uploaded, never named")
    partial = os.urandom(3000)
    ack = blob_put(
        workspace=workspace, sha256=sha(partial), offset=0, data=partial[:1000], final=False
    )
    assert ack.accepted, ack.reason
    stray = f"uploads/{workspace.pk}/{sha(b'lost')}/000000000000-abcdef"
    blob_storage().save(stray, ContentFile(b"x"))
    before = s3_blobs.keys()
    assert orphan.key in before and any(key.startswith("uploads/") for key in before)

    swept = blobs_gc(now=timezone.now() + timedelta(days=2))

    assert (swept.blobs, swept.uploads, swept.staged) == (1, 1, 1)
    assert s3_blobs.keys() == [kept.key]
    assert not BlobUpload.objects.exists()
    with blob_open(kept) as handle:
        assert handle.read() == b"an artifact"
