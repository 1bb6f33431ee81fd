"""Runner tools for blobs (protocol 3): what a job's workspace holds, and uploads in chunks.

Fenced like `report_case_log`: only the lease's current holder may call them for a job, and
the workspace is the one of the job's run. A chunk's base64 is bounded by its length before
it is decoded.
"""

from __future__ import annotations

import binascii
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mcpgateway.auth import current_principal
from mcpgateway.calls import in_thread
from runnercli.protocol import (
    MAX_ARTIFACTS_PER_RESULT,
    MAX_BLOB_CHUNK_BYTES,
    BlobAck,
    BlobHoldings,
    UploadAsk,
    UploadGrant,
    UploadGrants,
)
from runnercli.protocol.results import Sha256
from scorecards.blobs.services import (
    job_blob_holdings,
    job_blob_put,
    upload_begin,
    uploads_begin,
)

# The base64 of a whole chunk, padding included.
MAX_CHUNK_BASE64_CHARS = 4 * -(-MAX_BLOB_CHUNK_BYTES // 3)


def decoded_chunk(data: str) -> bytes:
    """The bytes of a chunk's base64 (bounded by the tool's schema before this)."""
    try:
        return binascii.a2b_base64(data, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise ToolError(f"data is not valid base64: {exc}") from exc


async def have_blobs(
    job_id: int,
    lease_epoch: int,
    sha256: Annotated[
        list[Sha256],
        Field(max_length=MAX_ARTIFACTS_PER_RESULT, description="The digests to ask about."),
    ],
) -> BlobHoldings:
    """Which of these blobs the job's workspace lacks (`missing`), and how many bytes of an
    unfinished upload it holds (`partial`: resume there)."""
    runner = current_principal().require_runner("have_blobs")
    return await in_thread(
        job_blob_holdings, runner=runner, job_id=job_id, lease_epoch=lease_epoch, sha256s=sha256
    )


async def put_blob(
    job_id: int,
    lease_epoch: int,
    sha256: Sha256,
    offset: Annotated[int, Field(ge=0)],
    data: Annotated[
        str,
        Field(
            max_length=MAX_CHUNK_BASE64_CHARS,
            description=f"Base64 of at most {MAX_BLOB_CHUNK_BYTES} bytes.",
        ),
    ],
    final: bool = False,
) -> BlobAck:
    """Upload one chunk of a blob at `offset` (where the upload stands: `stored`); `final`
    checks the whole against `sha256` and keeps it, or keeps nothing of it."""
    runner = current_principal().require_runner("put_blob")
    chunk = decoded_chunk(data)
    if len(chunk) > MAX_BLOB_CHUNK_BYTES:
        raise ToolError(f"a chunk is at most {MAX_BLOB_CHUNK_BYTES} bytes")
    return await in_thread(
        job_blob_put,
        runner=runner,
        job_id=job_id,
        lease_epoch=lease_epoch,
        sha256=sha256,
        offset=offset,
        data=chunk,
        final=final,
    )


async def begin_upload(
    job_id: int,
    lease_epoch: int,
    sha256: Sha256,
    size: Annotated[int, Field(ge=0)],
) -> UploadGrant:
    """Feature `raw_upload`: an upload URL for a blob of `size` bytes hashing to `sha256`,
    and where its upload stands (`offset`; `committed` when the workspace holds it). `PUT`
    the bytes to `url` in `Content-Range` chunks of at most `chunk_bytes`, with this
    runner's bearer token; `HEAD` it for the offset held after a dropped connection."""
    runner = current_principal().require_runner("begin_upload")
    return await in_thread(
        upload_begin,
        runner=runner,
        job_id=job_id,
        lease_epoch=lease_epoch,
        sha256=sha256,
        size=size,
    )


async def begin_uploads(
    job_id: int,
    lease_epoch: int,
    blobs: Annotated[
        list[UploadAsk],
        Field(max_length=MAX_ARTIFACTS_PER_RESULT, description="The blobs to upload."),
    ],
) -> UploadGrants:
    """Server feature `upload_batch`: `begin_upload` for several blobs in one call, one
    grant per blob in order (a blob over the server's limit gets a grant refused with the
    reason)."""
    runner = current_principal().require_runner("begin_uploads")
    grants = await in_thread(
        uploads_begin,
        runner=runner,
        job_id=job_id,
        lease_epoch=lease_epoch,
        blobs=[(ask.sha256, ask.size) for ask in blobs],
    )
    return UploadGrants(grants=grants)


BLOB_TOOLS: list[Callable[..., Any]] = [have_blobs, put_blob, begin_upload, begin_uploads]
