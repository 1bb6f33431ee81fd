"""The object store the blob tests write to: SeaweedFS's S3 gateway (bench/objectstore.py),
started once per test session when a test first asks for it, a bucket of its own per test.

    @pytest.mark.s3
    def test_…(s3_blobs):                 # STORAGES["blobs"] is this test's bucket
        storages["blobs"].save(…)
        with daphne(tmp_path, **s3_blobs.server_env()) as server: …   # the same bucket
        s3_blobs.store.restart()          # the gateway goes away and comes back

A test using them is marked `s3`: without `weed` it is skipped, or fails under REQUIRE_S3
(tests/required.py).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from objectstore import ObjectStore, object_store


@dataclass
class S3Blobs:
    """One test's bucket on the session's object store."""

    store: ObjectStore
    bucket: str

    def options(self, **overrides: Any) -> dict[str, Any]:
        """S3Storage options for this bucket (`EVERDICT_BLOB_STORAGE_OPTIONS`)."""
        return self.store.storage_options(**{"bucket_name": self.bucket, **overrides})

    def storages_entry(self, **overrides: Any) -> dict[str, Any]:
        return self.store.storages_entry(**{"bucket_name": self.bucket, **overrides})

    def server_env(self, **overrides: Any) -> dict[str, str]:
        """The environment pointing a server's blob storage at this bucket (several servers
        given it share the bucket, as replicas do)."""
        return self.store.server_env(**{"bucket_name": self.bucket, **overrides})

    def client(self) -> Any:
        return self.store.client()

    def keys(self, prefix: str = "") -> list[str]:
        """Every object's key in the bucket under `prefix`, sorted."""
        pages = self.client().get_paginator("list_objects_v2")
        return sorted(
            item["Key"]
            for page in pages.paginate(Bucket=self.bucket, Prefix=prefix)
            for item in page.get("Contents", ())
        )


@pytest.fixture(scope="session")
def object_store_process() -> Iterator[ObjectStore]:
    """The session's SeaweedFS, stopped and its data removed at the end."""
    with object_store() as store:
        yield store


@pytest.fixture
def s3_blobs(object_store_process: ObjectStore, settings: Any) -> S3Blobs:
    """A fresh bucket, which this process's `STORAGES["blobs"]` points at for the test."""
    store = object_store_process
    if store.proc is None or store.proc.popen.poll() is not None:
        # A test stopped it (or it died): the next one gets it back, over the same data.
        store.start()
    bucket = store.create_bucket(f"t-{secrets.token_hex(6)}")
    blobs = S3Blobs(store, bucket)
    settings.STORAGES = {**settings.STORAGES, "blobs": blobs.storages_entry()}
    return blobs
