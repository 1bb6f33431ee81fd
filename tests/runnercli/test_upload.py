"""The uploader against the real server: only what the workspace lacks, resumed where the
server stands, through dropped connections, and refusals told apart from a server that is
away."""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from everdict.processes import free_port
from runnercli.case.artifacts.upload import Uploaded, UploadRefused, upload
from runnercli.client import ServerUnavailable
from runnercli.protocol import JobFence
from scorecards.blobs.models import BlobUpload
from scorecards.blobs.services import blob_store
from scorecards.blobs.uploads import blob_put
from tests.live import LiveServer
from tests.runnercli.leased import ObservedClient, blob_server, paired_run, stored

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("blob_dir"),
]

T = TypeVar("T")
CHUNK = 1000


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def leased(
    server: LiveServer, token: str, go: Callable[[ObservedClient, JobFence], Awaitable[T]]
) -> tuple[ObservedClient, T]:
    """Lease the run's job with the runner's client (sending chunks of CHUNK bytes, within
    the server's limit), then `go` with it and the job's fence."""

    async def scenario() -> tuple[ObservedClient, T]:
        async with ObservedClient(server, token) as client:
            [held] = await client.lease()
            client.limits = client.limits.model_copy(update={"max_blob_chunk_bytes": CHUNK})
            client.calls.clear()
            return client, await go(client, held.fence)

    return asyncio.run(scenario())


def test_a_file_goes_up_in_chunks_of_the_size_the_runner_sends(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    data = os.urandom(4500)
    path = tmp_path / "report.bin"
    path.write_bytes(data)
    run = paired_run(alice)
    with blob_server(tmp_path, blob_dir) as server:
        client, done = leased(
            server, run.token, lambda client, fence: upload(client, fence, path, sha(data), 4500)
        )
    assert client.put_offsets() == [0, 1000, 2000, 3000, 4000]
    assert [args["final"] for args in client.of("put_blob")] == [False] * 4 + [True]
    assert len({args["job_id"] for _, args in client.calls}) == 1
    assert stored(blob_dir, run.workspace_id) == {sha(data): data}
    assert isinstance(done, Uploaded) and done.chunks == 5 and done.sent_bytes == len(data)


def test_a_blob_the_workspace_holds_is_not_sent(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    data = b"the same report as the last case"
    run = paired_run(alice)
    blob_store(workspace=run.workspace_id, data=data)
    with blob_server(tmp_path, blob_dir) as server:
        client, done = leased(
            server,
            run.token,
            lambda client, fence: upload(client, fence, data, sha(data), len(data)),
        )
    assert client.of("put_blob") == []
    assert done.held_already


def test_a_partial_upload_resumes_from_what_the_server_holds(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    data = os.urandom(3500)
    run = paired_run(alice)
    # An earlier attempt left the first two chunks on the server.
    for offset in (0, 1000):
        chunk = data[offset : offset + 1000]
        ack = blob_put(
            workspace=run.workspace_id, sha256=sha(data), offset=offset, data=chunk, final=False
        )
        assert ack.accepted, ack
    with blob_server(tmp_path, blob_dir) as server:
        client, _ = leased(
            server,
            run.token,
            lambda client, fence: upload(client, fence, data, sha(data), len(data)),
        )
    assert client.put_offsets() == [2000, 3000]
    assert stored(blob_dir, run.workspace_id) == {sha(data): data}
    assert not BlobUpload.objects.exists()


def test_a_reply_lost_with_the_connection_resumes_after_the_chunk_the_server_kept(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    data = os.urandom(4000)
    run = paired_run(alice)

    async def go(client: ObservedClient, fence: JobFence) -> Uploaded:
        client.lost_replies = {2}
        return await upload(client, fence, data, sha(data), len(data))

    with blob_server(tmp_path, blob_dir) as server:
        client, done = leased(server, run.token, go)
    # The second chunk reached the server; its reply did not. Asked again, the server says
    # where it stands, and that chunk is not sent twice.
    assert client.put_offsets() == [0, 1000, 2000, 3000]
    assert len(client.of("have_blobs")) == 2
    assert stored(blob_dir, run.workspace_id) == {sha(data): data}
    assert done.sent_bytes == len(data)


def test_a_server_that_stays_away_is_given_up_on_when_the_runner_aborts() -> None:
    # Nothing listens at this port: every call fails to connect.
    client = ObservedClient(f"http://127.0.0.1:{free_port()}", "rnr_" + "x" * 40)
    fence = JobFence(job_id=7, lease_epoch=2)
    abort = asyncio.Event()

    async def go() -> None:
        asyncio.get_running_loop().call_later(0.5, abort.set)
        async with client:
            await upload(client, fence, b"x", sha(b"x"), 1, abort=abort)

    with pytest.raises(ServerUnavailable):
        asyncio.run(go())
    assert client.of("have_blobs") and client.of("put_blob") == []


def test_a_refusal_is_final(alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path) -> None:
    data = os.urandom(5000)
    run = paired_run(alice)
    with blob_server(tmp_path, blob_dir, EVERDICT_MAX_ARTIFACT_BYTES=4096) as server:

        async def go(client: ObservedClient, fence: JobFence) -> None:
            # Its limits as an earlier greeting said them, before the server lowered its own.
            client.limits = client.limits.model_copy(update={"max_blob_chunk_bytes": 8192})
            with pytest.raises(UploadRefused, match="over the limit of 4096 bytes"):
                await upload(client, fence, data, sha(data), len(data))

        client, _ = leased(server, run.token, go)
    assert len(client.of("put_blob")) == 1
    assert stored(blob_dir, run.workspace_id) == {} and not BlobUpload.objects.exists()


def test_a_digest_that_does_not_match_is_refused_by_the_server(
    alice: Any, workspace: Any, tmp_path: Path, blob_dir: Path
) -> None:
    run = paired_run(alice)
    with blob_server(tmp_path, blob_dir) as server:

        async def go(client: ObservedClient, fence: JobFence) -> None:
            with pytest.raises(UploadRefused, match="hash to"):
                await upload(client, fence, b"real bytes", "0" * 64, 10)

        leased(server, run.token, go)
    assert stored(blob_dir, run.workspace_id) == {} and not BlobUpload.objects.exists()
