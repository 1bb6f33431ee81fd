"""The uploader: only what the server lacks, resumed where it stands, through dropped
connections, and refusals told apart from a server that is away."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

import pytest

from runnercli.case.artifacts.upload import Uploaded, UploadRefused, upload
from runnercli.client import ServerUnavailable
from runnercli.protocol import BlobAck, JobFence
from tests.runnercli.blob_server import BlobServerClient

FENCE = JobFence(job_id=7, lease_epoch=2)


def send(client: BlobServerClient, data: bytes | Path, size: int) -> Uploaded:
    digest = hashlib.sha256(data if isinstance(data, bytes) else data.read_bytes()).hexdigest()
    return asyncio.run(upload(client, FENCE, data, digest, size))


def test_a_file_goes_up_in_chunks_of_the_servers_size(tmp_path: Path) -> None:
    data = os.urandom(4500)
    path = tmp_path / "report.bin"
    path.write_bytes(data)
    client = BlobServerClient(chunk_bytes=1000)
    done = send(client, path, len(data))
    assert client.put_offsets() == [0, 1000, 2000, 3000, 4000]
    assert [args["final"] for args in client.of("put_blob")] == [False] * 4 + [True]
    assert {args["job_id"] for _, args in client.calls} == {7}
    assert client.blobs == {hashlib.sha256(data).hexdigest(): data}
    assert done.chunks == 5 and done.sent_bytes == len(data)


def test_a_blob_the_workspace_holds_is_not_sent() -> None:
    data = b"the same report as the last case"
    client = BlobServerClient()
    client.hold(data)
    done = send(client, data, len(data))
    assert client.of("put_blob") == []
    assert done.held_already


def test_a_partial_upload_resumes_from_what_the_server_holds() -> None:
    data = os.urandom(3500)
    client = BlobServerClient()
    client.partial[hashlib.sha256(data).hexdigest()] = bytearray(data[:2000])
    send(client, data, len(data))
    assert client.put_offsets() == [2000, 3000]
    assert list(client.blobs.values()) == [data]


def test_a_reply_lost_with_the_connection_resumes_after_the_chunk_the_server_kept() -> None:
    data = os.urandom(4000)
    client = BlobServerClient()
    client.drop_after = {2}
    done = send(client, data, len(data))
    # The second chunk reached the server; its reply did not. Asked again, the server says
    # where it stands, and that chunk is not sent twice.
    assert client.put_offsets() == [0, 1000, 2000, 3000]
    assert [tool for tool, _ in client.calls].count("have_blobs") == 2
    assert list(client.blobs.values()) == [data]
    assert done.sent_bytes == len(data)


def test_a_server_that_stays_away_is_given_up_on_when_the_runner_aborts() -> None:
    client = BlobServerClient()
    client.answer("have_blobs", *[ServerUnavailable("connection refused")] * 50)
    abort = asyncio.Event()

    async def go() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(0.5, abort.set)
        await upload(client, FENCE, b"x", hashlib.sha256(b"x").hexdigest(), 1, abort=abort)

    with pytest.raises(ServerUnavailable):
        asyncio.run(go())
    assert client.of("put_blob") == []


def test_a_refusal_is_final() -> None:
    client = BlobServerClient()
    client.answer("put_blob", BlobAck(accepted=False, reason="blob is over the limit"))
    with pytest.raises(UploadRefused, match="over the limit"):
        send(client, b"abc", 3)
    assert len(client.of("put_blob")) == 1


def test_a_digest_that_does_not_match_is_refused_by_the_server() -> None:
    client = BlobServerClient()
    with pytest.raises(UploadRefused, match="hash to"):
        asyncio.run(upload(client, FENCE, b"real bytes", "0" * 64, 10))
    assert client.blobs == {}
