"""What the server answers the runner: acks, its greeting and limits, a tool's failure."""

from __future__ import annotations

from pydantic import BaseModel, Field

from runnercli.protocol.limits import (
    MAX_ARTIFACT_BYTES,
    MAX_BLOB_CHUNK_BYTES,
    MAX_CASE_ARTIFACT_BYTES,
    MAX_JOBS_PER_LEASE,
    MAX_LOG_LINES_PER_CALL,
    MAX_RESULTS_BYTES_PER_CALL,
    MAX_RESULTS_PER_CALL,
    MAX_SCREEN_BYTES,
    MAX_WAIT_MS,
    SCREEN_INTERVAL_MS,
)
from runnercli.protocol.trace import MAX_TRACE_BYTES, MAX_TRACE_EVENTS


class Ack(BaseModel):
    accepted: bool
    reason: str = ""


class BatchAck(BaseModel):
    """The reply to `submit_job_results`: one ack per result, in the order they were sent."""

    acks: list[Ack]


class HeartbeatAck(Ack):
    cancel: bool = False
    # True when the call took back a lease that had expired (the runner slept): keep going.
    resumed: bool = False


class ScreenAck(Ack):
    """The reply to `report_case_screen`: `keeps_next` when the filmstrip will keep the next
    frame the server receives of the case (feature `raw_upload`: a large one goes up by `PUT`
    first, as a blob, and the call names it; others go inline, as one call beats two)."""

    keeps_next: bool = False


class Limits(BaseModel):
    """What this server accepts per call; a runner stays inside them."""

    max_jobs_per_lease: int = MAX_JOBS_PER_LEASE
    max_results_per_call: int = MAX_RESULTS_PER_CALL
    max_bytes_per_call: int = MAX_RESULTS_BYTES_PER_CALL
    max_log_lines_per_call: int = MAX_LOG_LINES_PER_CALL
    max_wait_ms: int = MAX_WAIT_MS
    # Protocol 3: blobs, screens and traces.
    max_blob_chunk_bytes: int = MAX_BLOB_CHUNK_BYTES
    max_artifact_bytes: int = MAX_ARTIFACT_BYTES
    max_case_artifact_bytes: int = MAX_CASE_ARTIFACT_BYTES
    screen_interval_ms: int = SCREEN_INTERVAL_MS
    max_screen_bytes: int = MAX_SCREEN_BYTES
    max_trace_events: int = MAX_TRACE_EVENTS
    max_trace_bytes: int = MAX_TRACE_BYTES


class Hello(BaseModel):
    runner_id: int
    label: str
    owner: str
    server_protocol: int
    update_required: bool
    limits: Limits = Field(default_factory=Limits)
    # Protocol 3: the newest runner release this server knows of ("" when it names none).
    latest_runner_version: str = ""
    # Protocol 4: what the server does beyond the calls (`SERVER_FEATURES`).
    features: list[str] = Field(default_factory=list)


class ToolFailure(BaseModel):
    """The structured content of a tool error. `retryable` says the server's own trouble
    (database unavailable or locked, a deadlock) refused the call: send it again later. Any
    other error is final."""

    code: str
    message: str
    retryable: bool = False
