"""Upload a blob to the job's workspace: only what the server lacks, resumed where it stands.

`have_blobs` first: a blob the workspace holds already (the same file from an earlier case)
is not sent at all, and a partial upload resumes from the bytes the server holds (a blob going
by `PUT` learns both from its grant instead). Then
`put_blob` chunks of `limits.max_blob_chunk_bytes`, base64 on the wire, the last one `final`
(the server checks the digest of the whole before it keeps anything). A dropped connection or
a server restart is waited out with backoff, like a result's delivery; then the server is
asked again where the upload stands, so nothing it holds is sent twice.

When both this runner and the server do `raw_upload`, a blob of `RAW_UPLOAD_MIN_BYTES` or more
goes as raw bytes instead: `begin_upload` gives a URL and the offset held, and plain HTTP
`PUT`s carry chunks of up to `MAX_RAW_CHUNK_BYTES` (`Content-Range`), each staged by the
server before the next; after a dropped connection or a server restart the runner asks the
URL where the upload stands (`HEAD`) and goes on from there (`rawput`). A smaller blob stays
in `put_blob` calls (one call beats two).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from runnercli.case.artifacts.calls import begin_uploads, have_blobs, put_blob
from runnercli.case.artifacts.rawput import upload_raw
from runnercli.case.artifacts.sending import (
    MAX_RESUMES,
    Uploaded,
    UploadRefused,
    Waiting,
    read_chunk,
)
from runnercli.case.artifacts.shelf import Shelf, Source
from runnercli.client import RunnerClient, RunnerError, ServerUnavailable, ToolCallError
from runnercli.protocol import (
    RAW_UPLOAD_MIN_BYTES,
    BlobHoldings,
    JobFence,
    ResultReport,
    UploadGrant,
)

# Uploaded and UploadRefused are named here too, as the other stages import them.
__all__ = [
    "Blob",
    "UploadRefused",
    "Uploaded",
    "read_chunk",
    "resend_blobs",
    "upload",
    "upload_many",
]

# How long an upload waits for a server it cannot reach before giving up (the result still
# names the blob: delivering it uploads the blob again when the server says it lacks it).
UPLOAD_PATIENCE_S = 600.0
# Blobs sent at once (each one's chunks go in order): the runner encodes one chunk while
# the server stores another.
UPLOADS_AT_ONCE = 4
# The server feature of `begin_uploads`: the upload URLs of several blobs in one call.
BATCH_FEATURE = "upload_batch"


async def upload(
    client: RunnerClient,
    fence: JobFence,
    source: Source,
    sha256: str,
    size: int,
    media_type: str = "application/octet-stream",
    *,
    holdings: BlobHoldings | None = None,
    abort: asyncio.Event | None = None,
    patience_s: float = UPLOAD_PATIENCE_S,
    grant: UploadGrant | None = None,
) -> Uploaded:
    """Make the job's workspace hold the blob `sha256` (`size` bytes of `source`). The media
    type is named by the result, not by the upload. Raise UploadRefused when the server
    refuses it, ServerUnavailable when it stayed out of reach past `patience_s` (or `abort`
    was set). `grant`: the blob's upload URL, given by `begin_uploads` just now."""
    done = Uploaded(sha256)
    waiting = Waiting(abort, patience_s)
    if by_put(client, size):
        # Its grant says what the server holds of it (`holdings` may not name it).
        return await upload_raw(client, fence, source, sha256, size, done, waiting, grant)
    offset = None if holdings is None else _resume_at(holdings, sha256)
    if offset is not None and offset < 0:
        return done
    resumes = 0
    while True:
        try:
            if offset is None:
                offset = _resume_at(await have_blobs(client, fence, [sha256]), sha256)
            if offset < 0:
                return done
            offset = await _send_from(client, fence, source, sha256, size, offset, done)
            if offset < 0:
                return done
            resumes += 1
            if resumes > MAX_RESUMES:
                raise UploadRefused(f"the server keeps moving where blob {sha256} resumes")
        except ServerUnavailable:
            if not await waiting.wait():
                raise
            offset = None


def by_put(client: RunnerClient, size: int) -> bool:
    """Whether a blob of `size` bytes goes by raw `PUT`s: then its grant (`begin_upload`,
    `begin_uploads`) says what the server holds of it, and `have_blobs` need not be asked."""
    return size >= RAW_UPLOAD_MIN_BYTES and client.offers("raw_upload")


@dataclass(frozen=True)
class Blob:
    """One blob to upload: where its bytes are, its digest and size."""

    source: Source
    sha256: str
    size: int


async def upload_many(
    client: RunnerClient,
    fence: JobFence,
    blobs: Sequence[Blob],
    *,
    holdings: BlobHoldings | None = None,
    abort: asyncio.Event | None = None,
    at_once: int = UPLOADS_AT_ONCE,
) -> list[Uploaded | RunnerError | UploadRefused]:
    """Upload several blobs, `at_once` at a time; for each, what its upload did or why it
    did not (UploadRefused, ServerUnavailable, ToolCallError), in order. The upload URLs of
    those going by `PUT` are asked in one call first when the server offers that; `holdings`
    (`have_blobs`) need only name the others."""
    gate = asyncio.Semaphore(max(1, at_once))
    grants = await _grants(client, fence, blobs)

    async def one(blob: Blob) -> Uploaded | RunnerError | UploadRefused:
        async with gate:
            try:
                return await upload(
                    client,
                    fence,
                    blob.source,
                    blob.sha256,
                    blob.size,
                    holdings=holdings,
                    abort=abort,
                    grant=grants.get(blob.sha256),
                )
            except (RunnerError, UploadRefused) as exc:
                return exc

    return list(await asyncio.gather(*(one(blob) for blob in blobs)))


async def _grants(
    client: RunnerClient, fence: JobFence, blobs: Sequence[Blob]
) -> dict[str, UploadGrant]:
    """The upload URLs of the blobs that go by `PUT`, by digest, from one `begin_uploads`
    (server feature `upload_batch`), which also says what the server holds of each; none
    when the server does not offer it or the call fails (each upload then asks for its
    own)."""
    if not client.offers("raw_upload") or BATCH_FEATURE not in client.server_features:
        return {}
    raw = {blob.sha256: blob.size for blob in blobs if by_put(client, blob.size)}
    if len(raw) < 2:
        return {}
    try:
        granted = await begin_uploads(client, fence, list(raw.items()))
    except RunnerError:
        return {}
    return dict(zip(raw, granted, strict=True))


def _resume_at(holdings: BlobHoldings, sha256: str) -> int:
    """Where the upload starts: -1 when the workspace holds the blob already."""
    if sha256 not in holdings.missing:
        return -1
    return holdings.partial.get(sha256, 0)


async def _send_from(
    client: RunnerClient,
    fence: JobFence,
    source: Source,
    sha256: str,
    size: int,
    offset: int,
    done: Uploaded,
) -> int:
    """Send chunks from `offset` to the end; -1 once the server holds the whole blob, or the
    offset the server says to resume from."""
    step = max(1, client.limits.max_blob_chunk_bytes)
    while True:
        chunk = await asyncio.to_thread(read_chunk, source, offset, step)
        final = offset + len(chunk) >= size
        done.chunks += 1
        done.sent_bytes += len(chunk)
        ack = await put_blob(client, fence, sha256, offset, chunk, final)
        if not ack.accepted:
            if ack.stored != offset and 0 <= ack.stored < size:
                return ack.stored  # the server stands elsewhere: resume there
            raise UploadRefused(ack.reason or "refused")
        if final:
            return -1
        offset = ack.stored


async def resend_blobs(
    client: RunnerClient,
    shelf: Shelf,
    report: ResultReport,
    *,
    abort: asyncio.Event | None = None,
    say: Callable[[str], None] = lambda line: None,
) -> ResultReport:
    """Upload, from the shelf, the blobs a result names that its job's workspace lacks (the
    server refused the result for one); the result as it can be sent now — without the
    artifacts whose bytes are no longer kept here, or that the server refuses."""
    refs = report.result.artifacts or []
    fence = JobFence(job_id=report.job_id, lease_epoch=report.lease_epoch)
    try:
        holdings = await have_blobs(client, fence, [ref.sha256 for ref in refs])
    except (ServerUnavailable, ToolCallError):
        return report  # sent again as it is: the server's answer says what next
    gone: set[str] = set()
    for ref in (ref for ref in refs if ref.sha256 in holdings.missing):
        source = shelf.source(ref.sha256)
        try:
            if source is None:
                raise UploadRefused("its bytes are no longer kept on this machine")
            say(f"sending artifact {ref.path} again")
            await upload(
                client, fence, source, ref.sha256, ref.size, holdings=holdings, abort=abort
            )
        except UploadRefused as exc:
            say(f"✗ artifact {ref.path} left out of the result: {exc}")
            gone.add(ref.sha256)
        except (ServerUnavailable, ToolCallError):
            return report
    if not gone:
        return report
    kept = [ref for ref in refs if ref.sha256 not in gone]
    result = report.result.model_copy(update={"artifacts": kept or None})
    return report.model_copy(update={"result": result})
