"""The blob tools over real HTTP: uploads by the lease's holder only, bounded before decoding,
and what a result names read back with the personal tools."""

from __future__ import annotations

import base64
import hashlib
import os
from typing import Any

import pytest

from accounts.services import api_key_create
from mcpgateway.blob_tools import MAX_CHUNK_BASE64_CHARS
from runnercli.protocol import MAX_BLOB_CHUNK_BYTES
from scorecards.blobs.models import Blob, BlobUpload
from tests.mcpgateway.mcp_client import call, error_text, structured
from tests.mcpgateway.test_runner_tools import RESULT, dispatch, lease, pair_via_rest
from tests.suites import suite

pytestmark = pytest.mark.e2e


@pytest.fixture
def key(alice: Any, workspace: Any) -> str:
    suite(alice, cases=1)
    return api_key_create(user=alice).key


@pytest.fixture
def held(gateway: Any, key: str) -> tuple[str, dict[str, int]]:
    """A runner's token and the fence of the job it holds."""
    paired = pair_via_rest(gateway, key)
    dispatch(gateway, key, paired["id"])
    job = lease(gateway, paired["token"])["job"]
    return paired["token"], {"job_id": job["job_id"], "lease_epoch": job["lease_epoch"]}


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def put(url: str, token: str, fence: dict[str, int], **args: Any) -> dict[str, Any]:
    return structured(call(url, token, "put_blob", {**fence, **args}))


def test_a_blob_goes_up_in_chunks_resumes_and_is_named_by_the_result(
    gateway: Any, key: str, held: tuple[str, dict[str, int]]
) -> None:
    token, fence = held
    data = os.urandom(MAX_BLOB_CHUNK_BYTES + 1000)
    digest = hashlib.sha256(data).hexdigest()
    asked = structured(call(gateway.url, token, "have_blobs", {**fence, "sha256": [digest]}))
    assert asked == {"missing": [digest], "partial": {}}

    first = put(gateway.url, token, fence, sha256=digest, offset=0, data=b64(data[:1000]))
    assert first == {"accepted": True, "reason": "", "stored": 1000}
    asked = structured(call(gateway.url, token, "have_blobs", {**fence, "sha256": [digest]}))
    assert asked == {"missing": [digest], "partial": {digest: 1000}}
    rest_ = data[1000:]
    last = put(gateway.url, token, fence, sha256=digest, offset=1000, data=b64(rest_), final=True)
    assert last == {"accepted": True, "reason": "", "stored": len(data)}
    assert structured(call(gateway.url, token, "have_blobs", {**fence, "sha256": [digest]})) == {
        "missing": [],
        "partial": {},
    }

    artifact = {"path": "out/blob.bin", "sha256": digest, "size": len(data)}
    result = {**RESULT, "artifacts": [artifact]}
    ack = structured(call(gateway.url, token, "submit_job_result", {**fence, "result": result}))
    assert ack == {"accepted": True, "reason": ""}

    read = structured(
        call(
            gateway.url,
            key,
            "get_artifact",
            {"run_id": _run_id(fence), "key": "c0", "path": "out/blob.bin"},
        )
    )
    assert read["encoding"] == "base64" and read["truncated"] is True
    assert base64.b64decode(read["content"]) == data[: 1024 * 1024]
    assert read["media_type"] == "application/octet-stream"
    case = structured(call(gateway.url, key, "get_case", {"run_id": _run_id(fence), "key": "c0"}))
    assert [a["path"] for a in case["runs"][0]["result"]["artifacts"]] == ["out/blob.bin"]


def _run_id(fence: dict[str, int]) -> int:
    from runners.models import RunnerJob

    return int(RunnerJob.objects.get(pk=fence["job_id"]).run_id)


def test_only_the_leases_holder_uploads_and_asks(
    gateway: Any, key: str, bob: Any, held: tuple[str, dict[str, int]]
) -> None:
    token, fence = held
    data = b"secret bytes"
    digest = hashlib.sha256(data).hexdigest()
    stale = {**fence, "lease_epoch": fence["lease_epoch"] - 1}
    other = pair_via_rest(gateway, key, label="desktop")["token"]
    stranger = pair_via_rest(gateway, api_key_create(user=bob).key, label="bobs")["token"]
    for caller, at in ((token, stale), (other, fence), (stranger, fence)):
        ack = put(gateway.url, caller, at, sha256=digest, offset=0, data=b64(data), final=True)
        assert ack["accepted"] is False, ack
        asked = call(gateway.url, caller, "have_blobs", {**at, "sha256": [digest]})
        assert asked.is_error, asked
    assert "unknown job" in error_text(
        call(gateway.url, stranger, "have_blobs", {**fence, "sha256": [digest]})
    )
    assert not Blob.objects.exists() and not BlobUpload.objects.exists()


def test_a_chunk_is_bounded_before_it_is_decoded_and_must_be_base64(
    gateway: Any, held: tuple[str, dict[str, int]]
) -> None:
    token, fence = held
    digest = "0" * 64
    too_long = "A" * (MAX_CHUNK_BASE64_CHARS + 4)
    refused = call(
        gateway.url, token, "put_blob", {**fence, "sha256": digest, "offset": 0, "data": too_long}
    )
    assert refused.is_error and "data" in error_text(refused)
    garbled = call(
        gateway.url, token, "put_blob", {**fence, "sha256": digest, "offset": 0, "data": "@@@="}
    )
    assert garbled.is_error and "base64" in error_text(garbled)
    bad_digest = call(
        gateway.url, token, "put_blob", {**fence, "sha256": "../../etc", "offset": 0, "data": ""}
    )
    assert bad_digest.is_error
    assert not BlobUpload.objects.exists()


def test_an_outsider_cannot_read_an_artifact(gateway: Any, charlie: Any, key: str) -> None:
    outsider = api_key_create(user=charlie).key
    reply = call(gateway.url, outsider, "get_artifact", {"run_id": 1, "key": "c0", "path": "x"})
    assert reply.is_error and "not found" in error_text(reply).lower()
