"""Blobs of a workspace: uploads in chunks that resume, a digest checked before anything is
kept, bounds, and whole bytes the server stores itself — against the real storage."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from core.errors import NotFound
from scorecards.blobs.models import Blob, BlobUpload
from scorecards.blobs.running import running_keep, running_take
from scorecards.blobs.services import (
    blob_get,
    blob_holdings,
    blob_open,
    blob_put,
    blob_storage,
    blob_store,
)
from scorecards.blobs.uploads import upload_discard
from scorecards.services import workspace_create

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("blob_dir")]

CHUNK = 64 * 1024


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def staged_files(workspace: Any) -> list[str]:
    """Every file under the workspace's staging area in the blob storage."""
    root = Path(blob_storage().path(f"uploads/{workspace.pk}"))
    return sorted(str(p) for p in root.rglob("*") if p.is_file()) if root.exists() else []


def read(blob: Blob) -> bytes:
    with blob_open(blob) as handle:
        return bytes(handle.read())


def upload(workspace: Any, data: bytes, chunk: int = CHUNK) -> list[Any]:
    digest, acks, offset = sha(data), [], 0
    while True:
        piece = data[offset : offset + chunk]
        final = offset + len(piece) >= len(data)
        acks.append(
            blob_put(workspace=workspace, sha256=digest, offset=offset, data=piece, final=final)
        )
        offset += len(piece)
        if final:
            return acks


def test_a_blob_uploaded_in_chunks_is_kept_once_with_its_bytes_and_no_staging_left(
    workspace: Any,
) -> None:
    data = os.urandom(3 * CHUNK + 100)
    acks = upload(workspace, data)
    assert [a.accepted for a in acks] == [True] * 4
    assert [a.stored for a in acks] == [CHUNK, 2 * CHUNK, 3 * CHUNK, len(data)]
    blob = blob_get(workspace=workspace, sha256=sha(data))
    assert blob.size == len(data)
    assert blob.key == f"blobs/{workspace.pk}/{sha(data)[:2]}/{sha(data)}"
    assert read(blob) == data
    assert not BlobUpload.objects.exists()
    assert staged_files(workspace) == []


def test_holdings_name_what_is_missing_and_where_a_partial_upload_resumes(
    workspace: Any,
) -> None:
    whole, part, none = b"whole", os.urandom(2 * CHUNK), b"never sent"
    upload(workspace, whole)
    blob_put(workspace=workspace, sha256=sha(part), offset=0, data=part[:CHUNK], final=False)
    holdings = blob_holdings(workspace=workspace, sha256s=[sha(whole), sha(part), sha(none)])
    assert holdings.missing == [sha(part), sha(none)]
    assert holdings.partial == {sha(part): CHUNK}

    # The upload resumes where the server stands.
    ack = blob_put(
        workspace=workspace, sha256=sha(part), offset=CHUNK, data=part[CHUNK:], final=True
    )
    assert ack.accepted and ack.stored == len(part)
    assert read(blob_get(workspace=workspace, sha256=sha(part))) == part


def test_a_chunk_away_from_where_the_upload_stands_is_refused_with_the_offset_to_resume_from(
    workspace: Any,
) -> None:
    data = os.urandom(3 * CHUNK)
    digest = sha(data)
    blob_put(workspace=workspace, sha256=digest, offset=0, data=data[:CHUNK], final=False)
    skipped = blob_put(
        workspace=workspace, sha256=digest, offset=2 * CHUNK, data=data[2 * CHUNK :], final=True
    )
    assert not skipped.accepted
    assert skipped.stored == CHUNK
    assert "the server holds 65536 bytes" in skipped.reason
    assert not Blob.objects.exists()
    assert len(staged_files(workspace)) == 1


def test_a_retry_of_the_last_chunk_is_answered_as_held_and_stored_once(workspace: Any) -> None:
    data = os.urandom(2 * CHUNK)
    digest = sha(data)
    first = blob_put(workspace=workspace, sha256=digest, offset=0, data=data[:CHUNK], final=False)
    again = blob_put(workspace=workspace, sha256=digest, offset=0, data=data[:CHUNK], final=False)
    assert first.accepted and again.accepted and again.stored == CHUNK
    assert len(staged_files(workspace)) == 1
    blob_put(workspace=workspace, sha256=digest, offset=CHUNK, data=data[CHUNK:], final=True)
    # The final chunk sent again after its commit: held, nothing changes.
    late = blob_put(workspace=workspace, sha256=digest, offset=CHUNK, data=data[CHUNK:], final=True)
    assert late.accepted and late.stored == len(data)
    assert Blob.objects.count() == 1


def test_bytes_that_do_not_hash_to_their_digest_are_refused_and_nothing_is_kept(
    workspace: Any, blob_dir: Path
) -> None:
    real = os.urandom(2 * CHUNK)
    forged = sha(b"something else")
    blob_put(workspace=workspace, sha256=forged, offset=0, data=real[:CHUNK], final=False)
    ack = blob_put(workspace=workspace, sha256=forged, offset=CHUNK, data=real[CHUNK:], final=True)
    assert not ack.accepted
    assert f"hash to {sha(real)}, not {forged}" in ack.reason
    assert not Blob.objects.exists()
    assert not BlobUpload.objects.exists()
    assert staged_files(workspace) == []
    assert not [p for p in blob_dir.rglob("*") if p.is_file()]


def test_a_blob_over_the_limit_is_refused_before_its_chunk_is_stored(
    workspace: Any, settings: Any
) -> None:
    settings.EVERDICT_MAX_ARTIFACT_BYTES = CHUNK + 10
    data = os.urandom(2 * CHUNK)
    digest = sha(data)
    assert blob_put(workspace=workspace, sha256=digest, offset=0, data=data[:CHUNK], final=False)
    over = blob_put(workspace=workspace, sha256=digest, offset=CHUNK, data=data[CHUNK:], final=True)
    assert not over.accepted
    assert f"over the limit of {CHUNK + 10} bytes" in over.reason
    assert not Blob.objects.exists() and not BlobUpload.objects.exists()
    assert staged_files(workspace) == []


def test_an_empty_blob_is_one_final_call(workspace: Any) -> None:
    ack = blob_put(workspace=workspace, sha256=sha(b""), offset=0, data=b"", final=True)
    assert ack.accepted and ack.stored == 0
    assert read(blob_get(workspace=workspace, sha256=sha(b""))) == b""


def test_the_server_stores_whole_bytes_once_per_workspace(workspace: Any, alice: Any) -> None:
    other = workspace_create(user=alice, slug="other", name="Other")
    frame = b"\x89PNG frame"
    first = blob_store(workspace=workspace, data=frame, media_type="image/png")
    again = blob_store(workspace=workspace.pk, data=frame, media_type="image/png")
    elsewhere = blob_store(workspace=other, data=frame, media_type="image/png")
    assert first.pk == again.pk != elsewhere.pk
    assert (first.sha256, first.size, first.media_type) == (sha(frame), len(frame), "image/png")
    assert read(first) == read(elsewhere) == frame
    # A workspace sees only its own blobs.
    third = workspace_create(user=alice, slug="third", name="Third")
    with pytest.raises(NotFound):
        blob_get(workspace=third, sha256=sha(frame))
    assert blob_holdings(workspace=third, sha256s=[sha(frame)]).missing == [sha(frame)]


def test_a_commit_hashes_the_staging_again_when_the_running_digest_is_of_other_chunks(
    workspace: Any,
) -> None:
    """The digest this process ran over its chunks is used only for exactly those chunks:
    when another replica discarded the upload and staged its own, the commit reads them."""
    data = os.urandom(2 * CHUNK)
    digest, first = sha(data), data[:CHUNK]
    wrong = bytes(CHUNK)
    assert blob_put(workspace=workspace, sha256=digest, offset=0, data=wrong, final=False).accepted
    [[stale_name, _]] = BlobUpload.objects.get().chunks
    stale = running_take(workspace.pk, digest, [stale_name])
    # Another replica: the upload begun again, its first chunk the right bytes.
    upload_discard(workspace.pk, digest)
    assert blob_put(workspace=workspace, sha256=digest, offset=0, data=first, final=False).accepted
    # This process still remembers its digest of the wrong bytes.
    running_keep(workspace.pk, digest, [stale_name], stale)

    ack = blob_put(workspace=workspace, sha256=digest, offset=CHUNK, data=data[CHUNK:], final=True)

    assert ack.accepted, ack.reason
    assert read(Blob.objects.get(sha256=digest)) == data
    assert staged_files(workspace) == []


def test_chunks_given_as_files_are_read_from_where_each_stands_and_a_bad_one_keeps_nothing(
    workspace: Any, tmp_path: Path
) -> None:
    data = os.urandom(3 * CHUNK + 123)
    digest = sha(data)
    first, rest = tmp_path / "first", tmp_path / "rest"
    first.write_bytes(b"skipped" + data[:CHUNK])
    rest.write_bytes(data[CHUNK:])
    with first.open("rb") as body:
        body.seek(len(b"skipped"))
        ack = blob_put(workspace=workspace, sha256=digest, offset=0, data=body, final=False)
    assert (ack.accepted, ack.stored) == (True, CHUNK)
    with rest.open("rb") as body:
        ack = blob_put(workspace=workspace, sha256=digest, offset=CHUNK, data=body, final=True)
    assert (ack.accepted, ack.stored) == (True, len(data))
    assert read(blob_get(workspace=workspace, sha256=digest)) == data
    assert staged_files(workspace) == []

    forged = sha(b"other bytes")
    with rest.open("rb") as body:
        ack = blob_put(workspace=workspace, sha256=forged, offset=0, data=body, final=True)
    assert not ack.accepted
    assert f"hash to {sha(data[CHUNK:])}, not {forged}" in ack.reason
    assert not Blob.objects.filter(sha256=forged).exists()
    assert staged_files(workspace) == []
