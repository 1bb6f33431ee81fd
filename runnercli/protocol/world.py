"""The case's world on the wire (protocol 3): blobs, screens and the fs rendezvous.

Every call here is fenced by `(job_id, lease_epoch)` like a result: only the lease's current
holder may upload for a job, report its screen, or answer a request for its files.
"""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, Field

from runnercli.protocol.limits import MAX_FS_ENTRIES
from runnercli.protocol.received import Received
from runnercli.protocol.replies import Ack
from runnercli.protocol.results import MediaType, Sha256


class JobFence(Received):
    """A job and the epoch of the lease its caller holds."""

    job_id: int
    lease_epoch: int


class BlobHoldings(BaseModel):
    """The reply to `have_blobs`: which of the asked blobs the job's workspace lacks, and
    how many bytes of an unfinished upload it already holds (to resume from)."""

    missing: list[str] = Field(default_factory=list)
    partial: dict[str, int] = Field(default_factory=dict)


class BlobAck(Ack):
    """The reply to `put_blob`: `stored` is how many bytes of the blob the server holds now
    (its whole size once `final` was accepted)."""

    stored: int = 0


class UploadGrant(Ack):
    """The reply to `begin_upload` (feature `raw_upload`): where to `PUT` the blob's bytes
    (`url`, a path on the server, good for `expires_in_s`), in `Content-Range` chunks of at
    most `chunk_bytes`, from `offset` (what the server holds of it already). `committed`: the
    workspace holds the blob, nothing to send."""

    url: str = ""
    offset: int = 0
    size: int = 0
    chunk_bytes: int = 0
    expires_in_s: int = 0
    committed: bool = False


class UploadAsk(BaseModel):
    """A blob `begin_uploads` is asked a URL for: its digest and size."""

    sha256: Sha256
    size: int = Field(ge=0)


class UploadGrants(BaseModel):
    """The reply to `begin_uploads` (server feature `upload_batch`): one grant per blob
    asked, in order; a grant not `accepted` says why (over the server's limit)."""

    grants: list[UploadGrant]


# How `submit_job_result` refuses a result naming a blob the job's workspace does not hold:
# the runner uploads it and sends the result again.
NOT_UPLOADED = "was not uploaded"


def artifact_not_uploaded(path: str, sha256: str) -> str:
    """The reason a result naming a blob the server does not hold is refused."""
    return f"artifact {path} (sha256 {sha256}) {NOT_UPLOADED}"


def names_missing_artifact(reason: str) -> bool:
    """Whether a refusal says the result named a blob that was not uploaded."""
    return reason.startswith("artifact ") and reason.endswith(NOT_UPLOADED)


class TraceAck(Ack):
    """The reply to `report_case_trace`: the highest `seq` stored so far for the attempt."""

    last_seq: int = -1


FsOp = Literal["list", "read"]


class FsRequest(BaseModel):
    """A member's request for a running case's files, for the runner holding its lease."""

    request_id: str
    job_id: int
    op: FsOp
    path: str = ""


class FsRequests(BaseModel):
    """The reply to `poll_case_fs_requests` (empty when its wait ran out)."""

    requests: list[FsRequest] = Field(default_factory=list)


class FsEntry(Received):
    """One entry of a directory listing: a path relative to the case's directory."""

    path: str = Field(max_length=1024)
    size: int = Field(ge=0)
    kind: Literal["file", "dir", "symlink", "other"]
    mtime: float = 0.0


FsEntries = Annotated[list[FsEntry], Field(max_length=MAX_FS_ENTRIES)]


class FsPosted(Received):
    """An answer carried by the runner's next `poll_case_fs_requests` (server feature
    `fs_answers`): a listing, or why not — fenced as `answer_case_fs_request` is. A file's
    answer, whose ack the runner waits for, goes by `answer_case_fs_request`."""

    job_id: int
    lease_epoch: int
    request_id: str = Field(max_length=40)
    entries: FsEntries | None = None
    error: str | None = Field(default=None, max_length=500)


# The most answers one poll carries (a poll takes at most as many requests).
MAX_FS_POSTED = 100


class BlobRef(Received):
    """A file's content, uploaded as a blob of the job's workspace before the answer."""

    sha256: Sha256
    size: int = Field(ge=0)
    media_type: MediaType = "application/octet-stream"


# Why a runner did not answer a request with its files (the first word of `error`): the
# server answers the page with the matching status.
FsRefusal = Literal["refused", "not_found", "too_large", "not_a_file", "not_a_directory", "kept"]


def fs_error(reason: FsRefusal, message: str) -> str:
    """The `error` of an answer: `"<reason>: <message>"`."""
    return f"{reason}: {message}"


def fs_error_reason(error: str) -> str:
    """The reason an `error` of an answer starts with (`""` when it names none)."""
    head, _, _ = error.partition(":")
    return head if head in get_args(FsRefusal) else ""
