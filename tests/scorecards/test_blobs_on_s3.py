"""The blob store's uploads on an S3-compatible object store (SeaweedFS's S3 gateway)."""

from __future__ import annotations

import hashlib
import os
from typing import Any

import pytest

from scorecards.blobs.services import blob_get, blob_open, blob_put

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
        assert h.read() == data
