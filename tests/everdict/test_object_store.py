"""What blobs on an S3-compatible object store can count on: django-storages' S3Storage as
`STORAGES["blobs"]`, against SeaweedFS's S3 gateway started on this machine.

Each test pins a behaviour the blob store is built on (docs/object-store.md says what
follows from each): the Storage calls it makes, names kept or overwritten, the content type
an object gets, how a stream of unknown length is uploaded and what cuts it short, that a
multipart upload's parts cannot be read back, how staged chunks become one blob, and what
memory reading and committing a large blob take.
"""

from __future__ import annotations

import hashlib
import os
from datetime import timedelta
from typing import IO, Any, cast

import pytest
from botocore.exceptions import ClientError
from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.utils import timezone
from s3_blobs import MIN_PART, RandomBytes, commit_by_copy, measure, put_random, stage
from storages.backends.s3 import S3Storage

# The engine under the tests does not change what the store does: one database pass runs it.
pytestmark = [pytest.mark.s3, pytest.mark.once]

MIB = 1024 * 1024


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def head(s3_blobs: Any, key: str) -> dict[str, Any]:
    return dict(s3_blobs.client().head_object(Bucket=s3_blobs.bucket, Key=key))


class OneMiBAtATime(RandomBytes):
    """A stream whose reads return at most one MiB, however much is asked for (as one
    staged chunk's body would)."""

    def read(self, size: int | None = -1) -> bytes:
        return super().read(MIB if size is None or size < 0 else min(size, MIB))


def test_the_store_refuses_another_secret_and_a_bucket_that_does_not_exist(
    s3_blobs: Any,
) -> None:
    storages["blobs"].save("blobs/1/aa/held", ContentFile(b"kept"))
    stranger = S3Storage(**s3_blobs.options(secret_key="not-the-secret"))
    misnamed = S3Storage(**s3_blobs.options(bucket_name=f"{s3_blobs.bucket}-typo"))

    with pytest.raises(ClientError) as refused:
        stranger.exists("blobs/1/aa/held")
    with pytest.raises(ClientError) as missing:
        misnamed.save("blobs/1/aa/held", ContentFile(b"kept"))

    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert code(missing) == "NoSuchBucket"


def test_the_storage_saves_opens_sizes_lists_and_deletes_under_the_blob_stores_keys(
    s3_blobs: Any,
) -> None:
    storage = storages["blobs"]
    assert isinstance(storage, S3Storage)
    data = os.urandom(3000)
    digest = sha(data)
    key = f"blobs/7/{digest[:2]}/{digest}"
    chunks = [f"uploads/7/{digest}/{offset:012d}-{offset:06x}" for offset in (0, 1500)]

    assert storage.save(key, ContentFile(data)) == key
    for number, name in enumerate(chunks):
        assert storage.save(name, ContentFile(data[number * 1500 : (number + 1) * 1500])) == name

    assert storage.exists(key) and storage.size(key) == 3000
    with storage.open(key, "rb") as handle:
        assert handle.read() == data
    # What garbage collection walks: workspaces, then digests, then chunks, each a "folder".
    assert storage.listdir("uploads") == (["7"], [])
    assert storage.listdir("uploads/7") == ([digest], [])
    assert storage.listdir(f"uploads/7/{digest}") == (
        [],
        [name.rsplit("/", 1)[1] for name in chunks],
    )
    assert storage.listdir("uploads/8") == ([], [])
    modified = storage.get_modified_time(chunks[0])
    assert abs(timezone.now() - modified) < timedelta(minutes=5)

    storage.delete(key)
    storage.delete(key)  # what is gone already: no error
    assert not storage.exists(key)
    with pytest.raises(FileNotFoundError):
        storage.open(key, "rb")
    assert s3_blobs.keys() == sorted(chunks)


def test_a_name_saved_again_is_overwritten_unless_file_overwrite_is_off_or_the_write_is_conditional(
    s3_blobs: Any,
) -> None:
    storage = storages["blobs"]
    name = "blobs/1/ab/twice"
    assert storage.save(name, ContentFile(b"one")) == name
    assert storage.save(name, ContentFile(b"two")) == name
    renaming = S3Storage(**s3_blobs.options(file_overwrite=False))

    kept = renaming.save(name, ContentFile(b"three"))

    assert kept != name and kept.startswith(f"{name}_")
    with storage.open(name, "rb") as first, storage.open(kept, "rb") as second:
        assert (first.read(), second.read()) == (b"two", b"three")
    # The store can write a name only while it is free, but only a direct PutObject (or
    # CompleteMultipartUpload) says so: storage.save() has no way to pass If-None-Match.
    client = s3_blobs.client()
    with pytest.raises(ClientError) as held:
        client.put_object(Bucket=s3_blobs.bucket, Key=name, Body=b"four", IfNoneMatch="*")
    assert code(held) == "PreconditionFailed"


def test_an_objects_content_type_comes_from_its_name_or_the_file_never_from_its_bytes(
    s3_blobs: Any,
) -> None:
    storage = storages["blobs"]
    png = b"\x89PNG\r\n\x1a\n" + os.urandom(64)
    storage.save("blobs/1/cd/frame", ContentFile(png))
    storage.save("exports/frame.png", ContentFile(png))
    typed = ContentFile(png)
    typed.content_type = "image/png"  # type: ignore[attr-defined]
    storage.save("blobs/1/cd/typed", typed)
    S3Storage(**s3_blobs.options(object_parameters={"ContentType": "text/plain"})).save(
        "blobs/1/cd/forced", ContentFile(png)
    )

    types = {
        key: head(s3_blobs, key)["ContentType"]
        for key in (
            "blobs/1/cd/frame",
            "exports/frame.png",
            "blobs/1/cd/typed",
            "blobs/1/cd/forced",
        )
    }

    assert types == {
        "blobs/1/cd/frame": "application/octet-stream",
        "exports/frame.png": "image/png",
        "blobs/1/cd/typed": "image/png",
        "blobs/1/cd/forced": "text/plain",
    }


def test_a_stream_of_unknown_length_is_uploaded_in_parts_each_sent_with_its_length(
    s3_blobs: Any,
) -> None:
    storage = storages["blobs"]
    stream = RandomBytes(12 * MIB)
    assert not stream.seekable()
    storage.save("blobs/1/ef/stream", File(cast(IO[bytes], stream), name="stream"))
    storage.save("blobs/1/ef/bytes", ContentFile(os.urandom(3 * MIB)))

    streamed, whole = head(s3_blobs, "blobs/1/ef/stream"), head(s3_blobs, "blobs/1/ef/bytes")

    # Two parts of boto3's default 8 MiB: the length was never needed before the first byte.
    assert (streamed["ContentLength"], streamed["ETag"].strip('"')[-2:]) == (12 * MIB, "-2")
    assert (whole["ContentLength"], "-" in whole["ETag"]) == (3 * MIB, False)
    with storage.open("blobs/1/ef/stream", "rb") as handle:
        assert sha(handle.read()) == stream.digest.hexdigest()


def test_a_stream_whose_reads_come_back_short_is_cut_after_its_second_read(
    s3_blobs: Any,
) -> None:
    """boto3 reads a stream it cannot seek once up to its multipart threshold (8 MiB): a
    shorter answer is taken for all there is but one last read, so a reader that returns one
    staged chunk per read stores two chunks of five, and says nothing."""
    storage = storages["blobs"]
    stream = OneMiBAtATime(5 * MIB)

    storage.save("blobs/1/fa/short", File(cast(IO[bytes], stream), name="short"))

    assert storage.size("blobs/1/fa/short") == 2 * MIB
    assert stream.offset == 2 * MIB


def test_a_multipart_uploads_parts_cannot_be_read_back_until_it_is_completed(
    s3_blobs: Any,
) -> None:
    client, bucket, key = s3_blobs.client(), s3_blobs.bucket, "blobs/1/ab/parts"
    upload = client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    part = os.urandom(5 * MIB)
    etag = client.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=1, Body=part)[
        "ETag"
    ]

    for asked in ({}, {"PartNumber": 1}, {"Range": "bytes=0-99"}):
        with pytest.raises(ClientError) as missing:
            client.get_object(Bucket=bucket, Key=key, **asked)
        assert code(missing) == "NoSuchKey", asked
    assert not storages["blobs"].exists(key)
    assert storages["blobs"].listdir("blobs/1/ab") == ([], [])
    listed = client.list_parts(Bucket=bucket, Key=key, UploadId=upload)["Parts"]
    assert [(p["PartNumber"], p["Size"]) for p in listed] == [(1, 5 * MIB)]

    client.complete_multipart_upload(
        Bucket=bucket,
        Key=key,
        UploadId=upload,
        MultipartUpload={"Parts": [{"ETag": etag, "PartNumber": 1}]},
    )
    assert client.get_object(Bucket=bucket, Key=key)["Body"].read() == part


def test_staged_chunks_of_at_least_5_mib_are_assembled_by_the_store_itself(
    s3_blobs: Any,
) -> None:
    storage, client = storages["blobs"], s3_blobs.client()
    keys, digest = stage(client, s3_blobs.bucket, "uploads/1/big", 11 * MIB, MIN_PART)
    small, _ = stage(client, s3_blobs.bucket, "uploads/1/small", 3 * MIB, MIB)

    assert commit_by_copy(storage, keys, "blobs/1/aa/big") == digest
    for key in keys:
        storage.delete(key)
    with storage.open("blobs/1/aa/big", "rb") as handle:
        assert sha(handle.read()) == digest
    # A part but the last under S3's 5 MiB is refused when the upload completes, as on AWS.
    with pytest.raises(ClientError) as refused:
        commit_by_copy(storage, small, "blobs/1/aa/small")
    assert code(refused) == "EntityTooSmall"
    assert not storage.exists("blobs/1/aa/small")
    uploads = client.list_multipart_uploads(Bucket=s3_blobs.bucket).get("Uploads", [])
    assert [u for u in uploads if u["Key"] == "blobs/1/aa/small"] == []


def test_a_read_streams_in_bounded_memory_but_storage_open_downloads_the_whole_object(
    s3_blobs: Any,
) -> None:
    digest = put_random(s3_blobs.client(), s3_blobs.bucket, "blobs/1/bb/big", 50 * MIB)

    streamed = measure("read-stream", s3_blobs.options(), key="blobs/1/bb/big")
    opened = measure("read-open", s3_blobs.options(), key="blobs/1/bb/big")

    assert streamed["digest"] == opened["digest"] == digest
    # 1 MiB pieces of the GetObject body: a few MiB at most, whatever the object's size.
    assert streamed["peak_growth_bytes"] < 8 * MIB, streamed
    # storage.open() holds the whole object in memory before its first read returns.
    assert opened["peak_growth_bytes"] > 50 * MIB, opened


def test_a_commit_through_the_server_is_bounded_by_its_parts_and_one_by_copy_by_neither(
    s3_blobs: Any,
) -> None:
    keys, digest = stage(s3_blobs.client(), s3_blobs.bucket, "uploads/1/c", 30 * MIB, 8 * MIB)
    options = s3_blobs.options()

    through = measure(
        "commit-unthreaded", options, keys=keys, target="blobs/1/cc/t", part_bytes=MIN_PART
    )
    copied = measure("commit-copy", options, keys=keys, target="blobs/1/cc/c", part_bytes=0)

    assert through["digest"] == copied["digest"] == digest
    for key in ("blobs/1/cc/t", "blobs/1/cc/c"):
        assert head(s3_blobs, key)["ContentLength"] == 30 * MIB
    # One part read ahead, one being sent, and the copy between them.
    assert through["peak_growth_bytes"] < 4 * MIN_PART, through
    assert copied["peak_growth_bytes"] < 8 * MIB, copied
