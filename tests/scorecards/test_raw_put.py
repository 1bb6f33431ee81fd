"""A raw upload's `PUT` in the server: let in before its body (the token, the fence, where the
upload stands), the body received into a file beside the store while it is hashed, then moved
into place and recorded in as few statements as it takes."""

from __future__ import annotations

import hashlib
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.utils import timezone

from core.errors import Conflict
from runners import queue
from runners.models import JobStatus, Runner, RunnerJob
from runners.services import runner_pair
from scorecards.blobs.fence import lease_workspace
from scorecards.blobs.gc import blobs_gc
from scorecards.blobs.models import Blob, BlobUpload
from scorecards.blobs.rawput import (
    UploadClaims,
    UploadRefusal,
    upload_claims,
    upload_open,
    upload_take,
    uploads_begin,
)
from scorecards.blobs.receiving import RECEIVING_PREFIX, Received
from scorecards.services import scheduler_expire_one_lease
from tests.suites import start, suite

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("blob_dir")]

MIB = 1 << 20


@pytest.fixture
def held(alice: Any, workspace: Any) -> tuple[str, Any]:
    """A runner's token and the job it holds."""
    suite(alice, cases=1)
    paired = runner_pair(owner=alice, label="laptop", capabilities=["python"])
    start(alice, paired.runner)
    [grant] = queue.job_lease(runner=paired.runner)
    return paired.token, grant.job


def claims_for(token: str, job: Any, data: bytes) -> UploadClaims:
    from runners.services import runner_authenticate

    runner = runner_authenticate(token)
    assert runner is not None
    return UploadClaims(
        runner_id=runner.pk,
        job_id=job.pk,
        lease_epoch=job.lease_epoch,
        workspace_id=job.run.workspace_id,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
    )


def put(token: str, claims: UploadClaims, first: int, chunk: bytes) -> tuple[int, bool]:
    opened = upload_open(token, claims, first, len(chunk))
    received = Received(opened.digest)
    try:
        for at in range(0, len(chunk), MIB):
            received.write(chunk[at : at + MIB])
        return upload_take(claims, opened, first, received)
    finally:
        received.close()


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def test_one_blob_in_one_put_takes_three_statements_and_is_moved_into_place(
    held: tuple[str, Any], blob_dir: Path, django_assert_num_queries: Any
) -> None:
    token, job = held
    data = os.urandom(3 * MIB + 5)
    claims = claims_for(token, job, data)
    # The runner's token; then the fence, the blob not held, the upload not begun, in one.
    with django_assert_num_queries(2):
        opened = upload_open(token, claims, 0, len(data))
    received = Received(opened.digest)
    assert received.path is not None and Path(received.path).parent == blob_dir / "uploads"
    for at in range(0, len(data), MIB):
        received.write(data[at : at + MIB])
    # The blob recorded: one INSERT.
    with django_assert_num_queries(1):
        assert upload_take(claims, opened, 0, received) == (len(data), True)
    received.close()
    [blob] = Blob.objects.filter(sha256=claims.sha256)
    assert (blob_dir / blob.key).read_bytes() == data
    assert files_under(blob_dir / "uploads") == []


def test_chunks_are_moved_into_the_staging_and_the_last_commits_on_the_carried_digest(
    held: tuple[str, Any], blob_dir: Path
) -> None:
    token, job = held
    data = os.urandom(2 * MIB + 7)
    claims = claims_for(token, job, data)
    assert put(token, claims, 0, data[:MIB]) == (MIB, False)
    [staged] = files_under(blob_dir / "uploads")
    assert staged.read_bytes() == data[:MIB]
    # A retry of the chunk staged: answered as held, nothing written.
    opened = upload_open(token, claims, 0, MIB)
    assert opened.held == (MIB, False)
    # A chunk that does not start where the upload stands.
    with pytest.raises(UploadRefusal) as refused:
        upload_open(token, claims, MIB + 1, 10)
    assert refused.value.status == 409 and f"holds {MIB} bytes" in refused.value.reason
    assert put(token, claims, MIB, data[MIB:]) == (len(data), True)
    [blob] = Blob.objects.filter(sha256=claims.sha256)
    assert (blob_dir / blob.key).read_bytes() == data
    assert not BlobUpload.objects.exists()
    assert files_under(blob_dir / "uploads") == []
    with pytest.raises(UploadRefusal) as replay:
        upload_open(token, claims, MIB, len(data) - MIB)
    assert replay.value.status == 409 and "committed already" in replay.value.reason


def test_the_grants_of_any_number_of_blobs_take_one_statement_and_say_where_each_stands(
    held: tuple[str, Any], settings: Any, django_assert_num_queries: Any
) -> None:
    token, job = held
    committed, partial, fresh = os.urandom(MIB + 3), os.urandom(2 * MIB + 1), os.urandom(MIB)
    assert put(token, claims_for(token, job, committed), 0, committed) == (len(committed), True)
    assert put(token, claims_for(token, job, partial), 0, partial[:MIB]) == (MIB, False)
    settings.EVERDICT_MAX_ARTIFACT_BYTES = 4 * MIB
    runner = Runner.objects.get(pk=job.leased_by_id)
    asks = [
        (hashlib.sha256(committed).hexdigest(), len(committed)),
        (hashlib.sha256(partial).hexdigest(), len(partial)),
        (hashlib.sha256(fresh).hexdigest(), len(fresh)),
        ("ab" * 32, 5 * MIB),  # over the limit: refused, not looked up
    ]
    fence = {"runner": runner, "job_id": job.pk, "lease_epoch": job.lease_epoch}
    for blobs in (asks[:1], asks, asks * 2):
        with django_assert_num_queries(1):
            grants = uploads_begin(**fence, blobs=blobs)
        assert len(grants) == len(blobs)
    grants = uploads_begin(**fence, blobs=asks)
    assert [(g.accepted, g.offset, g.committed) for g in grants] == [
        (True, len(committed), True),
        (True, MIB, False),
        (True, 0, False),
        (False, 0, False),
    ]
    assert "over the limit" in (grants[3].reason or "")
    claims = upload_claims(grants[1].url.rsplit("/", 1)[1])
    assert (claims.job_id, claims.sha256, claims.size) == (job.pk, asks[1][0], len(partial))
    with django_assert_num_queries(1):
        assert uploads_begin(**fence, blobs=asks[3:])[0].accepted is False
    # Another epoch: the fence's own statements say why.
    with pytest.raises(Conflict, match="stale lease"):
        uploads_begin(**{**fence, "lease_epoch": job.lease_epoch + 1}, blobs=asks)


def test_the_blob_calls_fence_finds_the_held_jobs_workspace_in_one_statement(
    held: tuple[str, Any], django_assert_num_queries: Any
) -> None:
    _, job = held
    runner = Runner.objects.get(pk=job.leased_by_id)
    fence = {"runner": runner, "job_id": job.pk, "lease_epoch": job.lease_epoch}
    workspace_id = job.run.workspace_id
    with django_assert_num_queries(1):
        assert lease_workspace(**fence, call="have_blobs") == (workspace_id, "")
    stale = {**fence, "lease_epoch": job.lease_epoch + 1}
    refused, why = lease_workspace(**stale, call="have_blobs")
    assert refused is None and "stale lease" in why


def test_grants_for_a_lapsed_lease_take_it_back(held: tuple[str, Any]) -> None:
    _, job = held
    with time_machine.travel(timezone.now() + timedelta(seconds=70), tick=False):
        assert scheduler_expire_one_lease()
    runner = Runner.objects.get(pk=job.leased_by_id)
    [grant] = uploads_begin(
        runner=runner, job_id=job.pk, lease_epoch=job.lease_epoch, blobs=[("cd" * 32, MIB)]
    )
    assert (grant.accepted, grant.offset, grant.committed) == (True, 0, False)
    assert RunnerJob.objects.get(pk=job.pk).status == JobStatus.LEASED


def test_bytes_that_do_not_hash_to_the_digest_keep_nothing(
    held: tuple[str, Any], blob_dir: Path
) -> None:
    token, job = held
    data = os.urandom(MIB + 3)
    claims = claims_for(token, job, data)
    assert put(token, claims, 0, data[:MIB]) == (MIB, False)
    with pytest.raises(UploadRefusal) as refused:
        put(token, claims, MIB, b"xyz")
    assert refused.value.status == 422 and "hash to" in refused.value.reason
    assert not Blob.objects.exists() and not BlobUpload.objects.exists()
    assert files_under(blob_dir / "uploads") == []


@pytest.mark.s3
def test_on_an_object_store_chunks_are_kept_on_the_carried_digest_and_a_bad_one_keeps_nothing(
    held: tuple[str, Any], s3_blobs: Any, django_assert_num_queries: Any
) -> None:
    token, job = held
    one = os.urandom(MIB + 1)
    claims = claims_for(token, job, one)
    opened = upload_open(token, claims, 0, len(one))
    received = Received(opened.digest)
    received.write(one)
    # Written to the store as it was hashed when it arrived: not read through SHA-256 again
    # (that way, through `blob_put`, takes several statements more).
    with django_assert_num_queries(1):
        assert upload_take(claims, opened, 0, received) == (len(one), True)
    [first] = Blob.objects.filter(sha256=claims.sha256)

    data = os.urandom(2 * MIB + 7)
    claims = claims_for(token, job, data)
    assert put(token, claims, 0, data[:MIB]) == (MIB, False)
    assert len(s3_blobs.keys("uploads/")) == 1
    assert put(token, claims, MIB, data[MIB:]) == (len(data), True)
    [blob] = Blob.objects.filter(sha256=claims.sha256)
    assert sorted(s3_blobs.keys()) == sorted([first.key, blob.key])
    for kept, sent in ((first, one), (blob, data)):
        body = s3_blobs.client().get_object(Bucket=s3_blobs.bucket, Key=kept.key)["Body"]
        assert body.read() == sent
    assert not BlobUpload.objects.exists()

    other = os.urandom(MIB + 3)
    wrong = claims_for(token, job, other)
    assert put(token, wrong, 0, other[:MIB]) == (MIB, False)
    with pytest.raises(UploadRefusal) as refused:
        put(token, wrong, MIB, b"xyz")
    assert refused.value.status == 422 and "hash to" in refused.value.reason
    assert sorted(s3_blobs.keys()) == sorted([first.key, blob.key])
    assert not BlobUpload.objects.exists()


def test_a_put_of_a_lapsed_lease_takes_it_back_and_one_of_another_workspace_is_refused(
    held: tuple[str, Any], blob_dir: Path
) -> None:
    token, job = held
    data = os.urandom(MIB + 1)
    claims = claims_for(token, job, data)
    with time_machine.travel(timezone.now() + timedelta(seconds=70), tick=False):
        assert scheduler_expire_one_lease()
    assert RunnerJob.objects.get(pk=job.pk).status == JobStatus.QUEUED
    # Not held as the URL says: the fence's own statements, which take the lease back.
    assert put(token, claims, 0, data) == (len(data), True)
    assert RunnerJob.objects.get(pk=job.pk).status == JobStatus.LEASED
    elsewhere = UploadClaims(**{**claims.__dict__, "workspace_id": claims.workspace_id + 1})
    with pytest.raises(UploadRefusal) as refused:
        upload_open(token, elsewhere, 0, 10)
    assert refused.value.status == 409 and "another workspace" in refused.value.reason


def test_a_body_handed_over_in_small_pieces_is_written_and_hashed_in_order(
    blob_dir: Path,
) -> None:
    data = os.urandom(3 * MIB + 100)
    pieces = [data[at : at + 8192] for at in range(0, len(data), 8192)]
    received = Received(hashlib.sha256())
    try:
        received.write_pieces(pieces)
        assert pieces == []  # let go of as they were written
        assert received.size == len(data)
        assert received.hexdigest() == hashlib.sha256(data).hexdigest()
        with received.open() as kept:
            assert kept.read() == data
    finally:
        received.close()
    assert received.closed and files_under(blob_dir / "uploads") == []


def test_closing_a_received_file_again_leaves_the_next_file_open(blob_dir: Path) -> None:
    received = Received(hashlib.sha256())
    received.close()
    # The descriptor's number is given to the next file opened: closing again must not
    # close that one.
    with open(blob_dir / "other", "wb") as other:
        received.close()
        other.write(b"still open")
    assert (blob_dir / "other").read_bytes() == b"still open"


def test_a_file_left_half_received_is_swept_after_the_grace(blob_dir: Path) -> None:
    root = blob_dir / "uploads"
    root.mkdir(parents=True)
    old, new = root / f"{RECEIVING_PREFIX}old", root / f"{RECEIVING_PREFIX}new"
    old.write_bytes(b"half")
    new.write_bytes(b"half")
    two_days_ago = (timezone.now() - timedelta(days=2)).timestamp()
    os.utime(old, (two_days_ago, two_days_ago))
    assert blobs_gc().staged == 1
    assert not old.exists() and new.exists()
