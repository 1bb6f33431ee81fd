"""The production configuration of blobs on S3 (docs/object-store.md), loaded by the real
settings in processes of their own: what one process keeps in `storages["blobs"]`, another
configured the same way reads, as replicas sharing one bucket do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.live import ROOT

pytestmark = [pytest.mark.s3, pytest.mark.once]

ROUND_TRIP = """
import sys, django
django.setup()
from django.core.files.base import ContentFile
from django.core.files.storage import storages
blobs = storages["blobs"]
name = "blobs/1/ab/settings-" + sys.argv[2]
if sys.argv[1] == "write":
    saved = blobs.save(name, ContentFile(sys.argv[2].encode() * 1000))
    parts = blobs.transfer_config.multipart_chunksize, blobs.transfer_config.use_threads
    print(type(blobs).__name__, saved, *parts)
else:
    with blobs.open(name, "rb") as handle:
        print(type(blobs).__name__, len(handle.read()))
    blobs.delete(name)
"""

# Whatever else the environment says about AWS is not the test's: only what it sets counts.
AWS_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_S3_ACCESS_KEY_ID",
    "AWS_S3_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
    "AWS_DEFAULT_REGION",
    "AWS_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
)


def with_settings(tmp_path: Path, action: str, word: str, **env: str) -> list[str]:
    """Run `action` (write, or read and delete) on `storages["blobs"]` in a process that loads
    the settings from this environment; what it printed."""
    child = {k: v for k, v in os.environ.items() if k not in AWS_VARIABLES}
    child.update(
        DJANGO_SETTINGS_MODULE="everdict.settings",
        EVERDICT_VAR_DIR=str(tmp_path / "var"),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        **env,
    )
    done = subprocess.run(
        [sys.executable, "-c", ROUND_TRIP, action, word],
        cwd=ROOT,
        env=child,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


def test_s3_configured_by_the_environment_keeps_a_blob_another_process_reads(
    s3_blobs: Any, tmp_path: Path
) -> None:
    store = s3_blobs.store
    keys = {
        # From the environment, never in the options' JSON.
        "AWS_ACCESS_KEY_ID": store.access_key,
        "AWS_SECRET_ACCESS_KEY": store.secret_key,
    }
    named = {
        "EVERDICT_BLOB_STORAGE": "storages.backends.s3.S3Storage",
        "EVERDICT_BLOB_STORAGE_OPTIONS": json.dumps(
            {
                "bucket_name": s3_blobs.bucket,
                "endpoint_url": store.endpoint_url,
                "region_name": "us-east-1",
                "addressing_style": "path",
            }
        ),
        **keys,
    }
    # The same store, its endpoint and region given by boto3's own variables.
    by_boto3 = {
        "EVERDICT_BLOB_STORAGE": "storages.backends.s3.S3Storage",
        "EVERDICT_BLOB_STORAGE_OPTIONS": json.dumps(
            {"bucket_name": s3_blobs.bucket, "addressing_style": "path"}
        ),
        "AWS_ENDPOINT_URL_S3": store.endpoint_url,
        "AWS_DEFAULT_REGION": "us-east-1",
        **keys,
    }

    written = with_settings(tmp_path, "write", "one", **named)
    assert s3_blobs.keys() == ["blobs/1/ab/settings-one"]
    read = with_settings(tmp_path, "read", "one", **by_boto3)

    # A commit's memory bounded: 5 MiB parts, one at a time.
    assert written == ["S3Storage", "blobs/1/ab/settings-one", str(5 * 1024 * 1024), "False"]
    assert read == ["S3Storage", "3000"]
    assert s3_blobs.keys() == []
