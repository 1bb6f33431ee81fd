"""A blob's bytes by raw `PUT`s (feature `raw_upload`, both sides).

`begin_upload` gives a URL, good for a while, and the offset the server holds (or
`begin_uploads` gives those of several blobs at once, when the server offers `upload_batch`);
plain HTTP `PUT`s carry chunks of up to the size the server names (`Content-Range`), each staged
by the server before the next. After a dropped connection or a server restart the runner asks
the URL itself where the upload stands (`HEAD`: `Upload-Offset`, `Upload-Complete`) while the
URL is good, and goes on from there; only a URL that expired or that the server no longer takes
(a lease moved on, an offset it disowns) sends it back to `begin_upload`.
"""

from __future__ import annotations

import asyncio
import time

from runnercli.case.artifacts.calls import begin_upload
from runnercli.case.artifacts.sending import (
    MAX_RESUMES,
    Uploaded,
    UploadRefused,
    Waiting,
    read_chunk,
)
from runnercli.case.artifacts.shelf import Source
from runnercli.client import RunnerClient, ServerUnavailable
from runnercli.protocol import MAX_RAW_CHUNK_BYTES, JobFence, UploadGrant

# A URL is asked for again this long before it expires (a chunk in flight must not outlive it).
EXPIRY_MARGIN_S = 30.0


class _Resume(Exception):
    """The server stands elsewhere (or the URL expired): ask it again where to go on."""


async def upload_raw(
    client: RunnerClient,
    fence: JobFence,
    source: Source,
    sha256: str,
    size: int,
    done: Uploaded,
    waiting: Waiting,
    grant: UploadGrant | None = None,
) -> Uploaded:
    """The blob as raw bytes: `PUT` chunks to the URL `begin_upload` gives (or `grant`, one
    `begin_uploads` gave just now), from the offset the server holds; after a dropped
    connection, from the offset a `HEAD` of the URL says."""
    resumes = 0
    # A grant given is used as it stands: neither asked for again nor checked by a `HEAD`.
    given, grant = grant, None
    good_until = 0.0 if given is None else time.monotonic() + given.expires_in_s - EXPIRY_MARGIN_S
    while True:
        try:
            if given is not None:
                grant, given = given, None
                if not grant.accepted:
                    raise UploadRefused(grant.reason or f"blob {sha256} refused")
            elif grant is None or time.monotonic() >= good_until:
                grant = await begin_upload(client, fence, sha256, size)
                good_until = time.monotonic() + grant.expires_in_s - EXPIRY_MARGIN_S
            else:
                grant = await _where(client, grant)
            if grant.committed:
                return done
            await _put_from(client, grant, source, size, done)
            return done
        except ServerUnavailable:
            if not await waiting.wait():
                raise
        except _Resume as exc:
            grant = None
            resumes += 1
            if resumes > MAX_RESUMES:
                raise UploadRefused(f"blob {sha256}: {exc}") from exc


async def _where(client: RunnerClient, grant: UploadGrant) -> UploadGrant:
    """The grant with the offset the server holds now, by a `HEAD` of its URL."""
    reply = await client.raw("HEAD", grant.url)
    if reply.status_code >= 500:
        raise ServerUnavailable(f"{client.site}: HTTP {reply.status_code}")
    offset = reply.headers.get("Upload-Offset", "")
    if reply.status_code != 200 or not offset.isdigit():
        raise _Resume(f"HEAD {grant.url}: HTTP {reply.status_code}")
    committed = reply.headers.get("Upload-Complete") == "?1"
    return grant.model_copy(update={"offset": int(offset), "committed": committed})


async def _put_from(
    client: RunnerClient, grant: UploadGrant, source: Source, size: int, done: Uploaded
) -> None:
    """`PUT` chunks from the grant's offset until the server says the blob is committed."""
    step = max(1, min(grant.chunk_bytes or MAX_RAW_CHUNK_BYTES, MAX_RAW_CHUNK_BYTES))
    offset = grant.offset
    while True:
        chunk = (
            read_chunk(source, offset, step)  # a slice of bytes held: no thread for it
            if isinstance(source, bytes)
            else await asyncio.to_thread(read_chunk, source, offset, step)
        )
        if not chunk:
            raise UploadRefused(f"the file ended at {offset} bytes, not {size}: it changed")
        headers = {
            "Content-Range": f"bytes {offset}-{offset + len(chunk) - 1}/{size}",
            "Content-Type": "application/octet-stream",
        }
        reply = await client.raw("PUT", grant.url, content=chunk, headers=headers)
        done.chunks += 1
        done.sent_bytes += len(chunk)
        if reply.status_code >= 500:
            raise ServerUnavailable(f"{client.site}: HTTP {reply.status_code}")
        try:
            body = reply.json()
        except ValueError:
            body = {}
        if reply.status_code in (200, 201):
            if body.get("committed"):
                return
            offset = int(body.get("offset", offset + len(chunk)))
            continue
        reason = str(body.get("detail") or f"HTTP {reply.status_code}")
        if reply.status_code in (409, 410):
            raise _Resume(reason)
        raise UploadRefused(reason)
