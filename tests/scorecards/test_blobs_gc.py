"""`manage.py blobs_gc`: blobs nobody names go (after a day), named ones stay whoever names
them, stale uploads and stray staged chunks go, and a retention forgets old runs' artifacts."""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.core.management import call_command
from django.utils import timezone

from runnercli.protocol import ArtifactRef
from runners import queue
from scorecards.blobs.models import Artifact, Blob, BlobUpload
from scorecards.blobs.references import BLOB_REFERENCES
from scorecards.blobs.services import blob_put, blob_store
from scorecards.models import CaseResult, Run
from scorecards.services import result_submit
from tests.suites import completed, pair, start, suite

pytestmark = [pytest.mark.django_db]

LATER = timedelta(days=2)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def named_by_a_result(user: Any, workspace: Any, data: bytes) -> Run:
    """A settled run whose one result names `data` as an artifact."""
    blob_store(workspace=workspace, data=data)
    runner = pair(user)
    run = start(user, runner)
    [grant] = queue.job_lease(runner=runner)
    ref = ArtifactRef(path="out.txt", sha256=sha(data), size=len(data), media_type="text/plain")
    result = completed("hello 0").model_copy(update={"artifacts": [ref]})
    ack = result_submit(
        runner=runner, job_id=grant.job.pk, lease_epoch=grant.job.lease_epoch, result=result
    )
    assert ack.accepted, ack.reason
    return run


def gc(*args: str) -> str:
    out = io.StringIO()
    call_command("blobs_gc", *args, stdout=out)
    return out.getvalue()


def exists(blob_dir: Path, blob: Blob) -> bool:
    return (blob_dir / blob.key).is_file()


@pytest.fixture
def screens_name_pngs() -> Iterator[None]:
    """Another app's model naming blobs (as screen frames do), registered for the test."""

    def frames() -> Any:
        return Blob.objects.filter(media_type="image/png").values_list("pk", flat=True)

    BLOB_REFERENCES.append(frames)
    yield
    BLOB_REFERENCES.remove(frames)


@pytest.mark.usefixtures("screens_name_pngs")
def test_blobs_nobody_names_go_after_a_day_and_the_named_ones_stay(
    alice: Any, workspace: Any, blob_dir: Path
) -> None:
    suite(alice, cases=1)
    named_by_a_result(alice, workspace, b"an artifact")
    frame = blob_store(workspace=workspace, data=b"\x89PNG", media_type="image/png")
    orphan = blob_store(workspace=workspace, data=b"uploaded, never named")
    artifact_blob = Blob.objects.get(sha256=sha(b"an artifact"))

    assert gc().startswith("removed 0 blob(s)")  # within the day: an upload on its way
    with time_machine.travel(timezone.now() + LATER):
        fresh = blob_store(workspace=workspace, data=b"just uploaded")
        dry = gc("--dry-run")
        assert dry.startswith(f"would remove 1 blob(s) ({len(b'uploaded, never named')} bytes)")
        assert Blob.objects.count() == 4 and exists(blob_dir, orphan)
        assert gc().startswith("removed 1 blob(s)")
    assert set(Blob.objects.values_list("pk", flat=True)) == {artifact_blob.pk, frame.pk, fresh.pk}
    assert not exists(blob_dir, orphan)
    assert exists(blob_dir, artifact_blob) and exists(blob_dir, frame)


def test_stale_uploads_and_stray_staged_chunks_go(workspace: Any, blob_dir: Path) -> None:
    data = os.urandom(3000)
    blob_put(workspace=workspace, sha256=sha(data), offset=0, data=data[:1000], final=False)
    stray_dir = blob_dir / "uploads" / str(workspace.pk) / sha(b"lost")
    stray_dir.mkdir(parents=True)
    stray = stray_dir / "000000000000-abcdef"
    stray.write_bytes(b"x")
    with time_machine.travel(timezone.now() + LATER, tick=False):
        old = (timezone.now() - LATER).timestamp()
        os.utime(stray, (old, old))
        kept = os.urandom(10)
        blob_put(workspace=workspace, sha256=sha(kept), offset=0, data=kept[:5], final=False)
        said = gc()
    assert "1 stale upload(s), 1 stray staged chunk(s)" in said
    assert list(BlobUpload.objects.values_list("sha256", flat=True)) == [sha(kept)]
    assert not stray.exists()
    staged = [p for p in (blob_dir / "uploads").rglob("*") if p.is_file()]
    assert len(staged) == 1 and sha(kept) in str(staged[0])


def test_a_retention_forgets_old_runs_artifacts_and_their_blobs_keeping_the_results(
    alice: Any, workspace: Any, blob_dir: Path, settings: Any
) -> None:
    suite(alice, cases=1)
    with time_machine.travel(timezone.now() - timedelta(days=40)):
        old = named_by_a_result(alice, workspace, b"old artifact")
    recent = named_by_a_result(alice, workspace, b"recent artifact")
    settings.EVERDICT_RETENTION_DAYS = 30
    assert "would forget 1 row(s)" in gc("--dry-run")
    assert Artifact.objects.count() == 2
    said = gc()
    assert said.startswith("removed 1 blob(s)") and "forgot 1 row(s)" in said
    assert list(Artifact.objects.values_list("result__run", flat=True)) == [recent.pk]
    assert list(Blob.objects.values_list("sha256", flat=True)) == [sha(b"recent artifact")]
    assert CaseResult.objects.filter(run=old).exists()
