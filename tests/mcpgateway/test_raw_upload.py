"""Raw uploads over real HTTP (feature `raw_upload`): `begin_upload` mints a URL, `PUT`s carry
4 MiB chunks to it (a runner of before, whose chunks were at most that), and a server
restarted between two chunks resumes from what it held. Every refusal says why and keeps
nothing; a runner without the feature still uploads in `put_blob` calls; `begin_uploads`
mints several URLs in one call, and the runner's uploads of several blobs use it."""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from django.core import signing

from accounts.services import api_key_create
from runnercli.case.artifacts.upload import Blob as Upload
from runnercli.case.artifacts.upload import Uploaded, upload, upload_many
from runnercli.client import RunnerClient
from runnercli.protocol import JobFence
from runnercli.protocol.features import RUNNER_FEATURES
from scorecards.blobs.models import Blob, BlobUpload
from scorecards.blobs.rawput import SALT, UploadClaims, upload_claims, upload_token
from tests.live import LiveServer, daphne
from tests.mcpgateway.mcp_client import call, error_text, structured
from tests.mcpgateway.test_runner_tools import dispatch, lease, pair_via_rest
from tests.suites import suite

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

MIB = 1024 * 1024
SIZE = 8 * MIB


def server_env(blob_dir: Path) -> dict[str, Any]:
    options = {"location": str(blob_dir), "allow_overwrite": True}
    return {"EVERDICT_LEASE_TTL_S": 60, "EVERDICT_BLOB_STORAGE_OPTIONS": json.dumps(options)}


def http(
    server: LiveServer,
    method: str,
    url: str,
    token: str | None,
    body: bytes = b"",
    content_range: str | None = None,
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """One plain HTTP request; (status, its JSON, its headers)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if content_range is not None:
        headers["Content-Range"] = content_range
    request = urllib.request.Request(
        server.url + url, data=body if method == "PUT" else None, method=method, headers=headers
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as reply:
            raw, status, got = reply.read(), reply.status, dict(reply.headers)
    except urllib.error.HTTPError as exc:
        raw, status, got = exc.read(), exc.code, dict(exc.headers)
    return status, json.loads(raw) if raw else {}, got


def put(
    server: LiveServer, url: str, token: str, data: bytes, first: int, size: int
) -> tuple[int, dict[str, Any]]:
    last = first + len(data) - 1
    status, body, _ = http(server, "PUT", url, token, data, f"bytes {first}-{last}/{size}")
    return status, body


def begin(server: LiveServer, token: str, fence: dict[str, int], data: bytes) -> dict[str, Any]:
    asked = {**fence, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    return structured(call(server.url, token, "begin_upload", asked))


def nothing_kept(blob_dir: Path, data: bytes) -> bool:
    digest = hashlib.sha256(data).hexdigest()
    staged = [p for p in (blob_dir / "uploads").rglob("*") if p.is_file()]
    return (
        not Blob.objects.filter(sha256=digest).exists()
        and not BlobUpload.objects.filter(sha256=digest).exists()
        and not [p for p in staged if digest in str(p)]
    )


class PastSigner(signing.TimestampSigner):
    """Signs as if an hour ago (a URL past its expiry)."""

    def timestamp(self) -> str:
        return signing.b62_encode(int(time.time()) - 3600)


def test_an_8_mib_put_resumes_across_a_restart_and_every_refusal_says_why(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    suite(alice, cases=1)
    key = api_key_create(user=alice).key
    env = server_env(blob_dir)
    data = random.Random(3).randbytes(SIZE)
    digest = hashlib.sha256(data).hexdigest()

    with daphne(tmp_path, **env) as first:
        paired = pair_via_rest(first, key)
        token = paired["token"]
        dispatch(first, key, paired["id"])
        job = lease(first, token, protocol=4, features=["raw_upload"])["job"]
        fence = {"job_id": job["job_id"], "lease_epoch": job["lease_epoch"]}
        hello = structured(call(first.url, token, "hello", {"protocol": 4}))
        assert "raw_upload" in hello["features"]
        grant = begin(first, token, fence, data)
        assert grant["offset"] == 0 and grant["committed"] is False
        assert grant["chunk_bytes"] == 8 * MIB  # the server's default chunk
        assert grant["url"].startswith("/uploads/")
        assert put(first, grant["url"], token, data[: 4 * MIB], 0, SIZE) == (
            200,
            {"offset": 4 * MIB, "committed": False},
        )

    with daphne(tmp_path, **env) as second:
        # Restarted between two chunks: the server says what it held, and takes the rest.
        status, state, headers = http(second, "HEAD", grant["url"], token)
        assert (status, headers["Upload-Offset"]) == (200, str(4 * MIB))
        status, state, _ = http(second, "GET", grant["url"], token)
        assert state == {"offset": 4 * MIB, "committed": False}
        assert put(second, grant["url"], token, data[4 * MIB :], 4 * MIB, SIZE) == (
            201,
            {"offset": SIZE, "committed": True},
        )
        [blob] = Blob.objects.filter(sha256=digest)
        assert blob.size == SIZE
        assert hashlib.sha256((blob_dir / blob.key).read_bytes()).hexdigest() == digest
        assert not BlobUpload.objects.exists()
        assert not [p for p in (blob_dir / "uploads").rglob("*") if p.is_file()]

        # A replay after the commit.
        status, body = put(second, grant["url"], token, data[4 * MIB :], 4 * MIB, SIZE)
        assert status == 409 and "committed already" in body["detail"]
        again = begin(second, token, fence, data)
        assert (again["offset"], again["committed"]) == (SIZE, True)
        assert Blob.objects.filter(sha256=digest).count() == 1

        refusals(second, key, token, fence, blob_dir)
        old_and_new_runners(second, token, fence, blob_dir)
        batches(second, token, fence, blob_dir)


def refusals(
    server: LiveServer, key: str, token: str, fence: dict[str, int], blob_dir: Path
) -> None:
    other = random.Random(4).randbytes(MIB + 10)
    grant = begin(server, token, fence, other)
    url, size = grant["url"], len(other)

    def staged_then(content_range: str, body: bytes) -> tuple[int, str]:
        """Stage the first half MiB, then send a bad chunk; its status and reason."""
        assert put(server, url, token, other[: MIB // 2], 0, size)[0] == 200
        status, reply, _ = http(server, "PUT", url, token, body, content_range)
        return status, reply["detail"]

    # Bodies that are not what Content-Range says, and a range past the end: the staging goes.
    half = MIB // 2
    status, why = staged_then(f"bytes {half}-{half + 99}/{size}", b"x" * 150)
    assert status == 400 and "longer than Content-Range" in why
    assert nothing_kept(blob_dir, other)
    status, why = staged_then(f"bytes {half}-{half + 99}/{size}", b"x" * 50)
    assert status == 400 and "shorter than Content-Range" in why
    assert nothing_kept(blob_dir, other)
    status, why = staged_then(f"bytes {half}-{size}/{size}", b"x" * (size - half + 1))
    assert status == 416 and "goes past" in why
    assert nothing_kept(blob_dir, other)
    # The URL used for other bytes: another size, or bytes that do not hash to its digest.
    status, reply = put(server, url, token, other[:100], 0, size + 1)
    assert status == 400 and f"this upload URL is for {size}" in reply["detail"]
    status, reply = put(server, url, token, other[::-1], 0, size)
    assert status == 422 and "hash to" in reply["detail"]
    assert nothing_kept(blob_dir, other)
    # Without a runner's token, by another runner, with a forged, expired or stale URL.
    assert http(server, "PUT", url, None, other, f"bytes 0-{size - 1}/{size}")[0] == 401
    desktop = pair_via_rest(server, key, label="desktop")["token"]
    status, reply = put(server, url, desktop, other, 0, size)
    assert status == 403 and "another runner" in reply["detail"]
    status, reply = put(server, url[:-3] + "abc", token, other, 0, size)
    assert status == 403 and "not an upload URL" in reply["detail"]
    claims = upload_claims(url.removeprefix("/uploads/"))
    expired = upload_token(claims, signer=PastSigner(salt=SALT))
    status, reply = put(server, f"/uploads/{expired}", token, other, 0, size)
    assert status == 410 and "expired" in reply["detail"]
    stale_claims = UploadClaims(**{**claims.__dict__, "lease_epoch": claims.lease_epoch - 1})
    stale = upload_token(stale_claims)
    status, reply = put(server, f"/uploads/{stale}", token, other, 0, size)
    assert status == 409 and reply["detail"], reply
    asked = {**fence, "lease_epoch": 0, "sha256": "a" * 64, "size": 1}
    assert error_text(call(server.url, token, "begin_upload", asked))
    assert nothing_kept(blob_dir, other)
    # The server's other requests went on meanwhile; the URL still takes the right bytes.
    assert http(server, "GET", "/healthz", None)[0] == 200
    assert put(server, url, token, other, 0, size) == (201, {"offset": size, "committed": True})


def old_and_new_runners(
    server: LiveServer, token: str, fence: dict[str, int], blob_dir: Path
) -> None:
    """The runner's own upload: raw `PUT`s when both sides do `raw_upload`, `put_blob` calls
    (1 MiB each) for a runner without it."""
    at = JobFence(**fence)

    async def send(data: bytes, features: list[str] | None) -> int:
        async with RunnerClient(server.url, token) as client:
            if features is not None:
                client.features = features
            await client.hello(capabilities=[])
            done = await upload(client, at, data, hashlib.sha256(data).hexdigest(), len(data))
            return done.chunks

    raw = random.Random(5).randbytes(3 * MIB)
    old = random.Random(6).randbytes(3 * MIB)
    assert asyncio.run(send(raw, None)) == 1
    without = [f for f in RUNNER_FEATURES if f != "raw_upload"]
    assert asyncio.run(send(old, without)) == 3
    for data in (raw, old):
        [blob] = Blob.objects.filter(sha256=hashlib.sha256(data).hexdigest())
        assert (blob_dir / blob.key).read_bytes() == data


def batches(server: LiveServer, token: str, fence: dict[str, int], blob_dir: Path) -> None:
    """`begin_uploads`: a grant per blob in order (one held already, one over the limit, one
    new); a chunk over the server's chunk is refused; the runner's `upload_many` sends
    several blobs on the grants of one call."""
    held = random.Random(5).randbytes(3 * MIB)  # uploaded by `old_and_new_runners`
    new = random.Random(7).randbytes(9 * MIB)
    asks = [
        {"sha256": hashlib.sha256(held).hexdigest(), "size": len(held)},
        {"sha256": "b" * 64, "size": 11 * MIB},
        {"sha256": hashlib.sha256(new).hexdigest(), "size": len(new)},
    ]
    hello = structured(call(server.url, token, "hello", {"protocol": 4}))
    assert "upload_batch" in hello["features"]
    reply = structured(call(server.url, token, "begin_uploads", {**fence, "blobs": asks}))
    first, over, fresh = reply["grants"]
    assert (first["committed"], first["offset"]) == (True, 3 * MIB)
    assert over["accepted"] is False and "over the limit" in over["reason"]
    assert (fresh["accepted"], fresh["offset"], fresh["committed"]) == (True, 0, False)
    stale = {**fence, "lease_epoch": 0, "blobs": asks}
    assert error_text(call(server.url, token, "begin_uploads", stale))
    status, body = put(server, fresh["url"], token, new[: 8 * MIB + 1], 0, len(new))
    assert status == 413 and f"at most {8 * MIB} bytes" in body["detail"]
    assert nothing_kept(blob_dir, new)

    blobs = [random.Random(10 + n).randbytes(MIB + n) for n in range(3)]
    items = [Upload(data, hashlib.sha256(data).hexdigest(), len(data)) for data in blobs]

    async def send(batch: bool) -> list[Any]:
        async with RunnerClient(server.url, token) as client:
            await client.hello(capabilities=[])
            if not batch:  # a server of before: a begin_upload per blob
                client.server_features.remove("upload_batch")
            return await upload_many(client, JobFence(**fence), items[:2] if batch else items)

    for batch in (True, False):
        done = asyncio.run(send(batch))
        assert all(type(o) is Uploaded for o in done), done
    # The first two went on the grants of one call; the third, on its own URL.
    assert [o.chunks for o in done] == [0, 0, 1]
    for data in blobs:
        [blob] = Blob.objects.filter(sha256=hashlib.sha256(data).hexdigest())
        assert (blob_dir / blob.key).read_bytes() == data
