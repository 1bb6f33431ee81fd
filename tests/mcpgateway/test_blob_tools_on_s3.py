"""Two servers over one bucket of a real object store (SeaweedFS's S3 gateway): an upload
begun on one resumes on the other, across a restart of the store in the middle."""

from __future__ import annotations

import base64
import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from accounts.services import api_key_create
from everdict.processes import daphne_args, free_port, spawn
from tests.live import LiveServer, server_env, wait_http
from tests.mcpgateway.mcp_client import call, structured
from tests.mcpgateway.test_runner_tools import dispatch, lease, pair_via_rest
from tests.suites import suite

pytestmark = [pytest.mark.e2e, pytest.mark.s3]


@contextmanager
def replicas(tmp_path: Path, count: int, **env: str) -> Iterator[list[LiveServer]]:
    """`count` daphnes over the test database with this environment, started side by side."""
    ports = [free_port() for _ in range(count)]
    procs = [
        spawn(
            daphne_args(port),
            tmp_path / f"daphne-{port}-{time.monotonic_ns()}.log",
            server_env(**env),
        )
        for port in ports
    ]
    try:
        for proc, port in zip(procs, ports, strict=True):
            wait_http(f"http://127.0.0.1:{port}/healthz", proc=proc)
        yield [LiveServer(proc, port) for proc, port in zip(procs, ports, strict=True)]
    finally:
        for proc in procs:
            proc.stop()


def test_an_upload_begun_on_one_server_resumes_on_another_after_the_store_restarts(
    transactional_db: Any, alice: Any, workspace: Any, s3_blobs: Any, tmp_path: Path
) -> None:
    suite(alice, cases=1)
    key = api_key_create(user=alice).key
    data = os.urandom(300_000)
    digest = hashlib.sha256(data).hexdigest()
    with replicas(tmp_path, 2, **s3_blobs.server_env()) as (one, two):
        paired = pair_via_rest(one, key)
        dispatch(one, key, paired["id"])
        job = lease(one, paired["token"])["job"]
        fence = {"job_id": job["job_id"], "lease_epoch": job["lease_epoch"]}

        def put(server: Any, offset: int, final: bool) -> dict[str, Any]:
            piece = data[offset : 100_000 if not final else None]
            chunk = {"sha256": digest, "offset": offset, "data": base64.b64encode(piece).decode()}
            reply = call(
                server.url, paired["token"], "put_blob", {**fence, **chunk, "final": final}
            )
            return structured(reply)

        def held(server: Any) -> dict[str, Any]:
            asked = {**fence, "sha256": [digest]}
            return structured(call(server.url, paired["token"], "have_blobs", asked))

        assert put(one, 0, final=False) == {"accepted": True, "reason": "", "stored": 100_000}
        [staged] = s3_blobs.keys("uploads/")
        # Killed, not drained: what it acknowledged is what it kept.
        s3_blobs.store.restart(crash=True)

        assert held(two) == {"missing": [digest], "partial": {digest: 100_000}}
        last = put(two, 100_000, final=True)
        assert last == {"accepted": True, "reason": "", "stored": len(data)}
        assert held(one) == {"missing": [], "partial": {}}

    assert s3_blobs.keys() == [f"blobs/{workspace.pk}/{digest[:2]}/{digest}"]
    body = s3_blobs.client().get_object(Bucket=s3_blobs.bucket, Key=s3_blobs.keys()[0])["Body"]
    assert body.read() == data
    assert staged.startswith(f"uploads/{workspace.pk}/{digest}/")
