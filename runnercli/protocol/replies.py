"""What the server answers the runner: acks, its greeting and limits, a tool's failure."""

from __future__ import annotations

from pydantic import BaseModel, Field

from runnercli.protocol.limits import (
    MAX_JOBS_PER_LEASE,
    MAX_LOG_LINES_PER_CALL,
    MAX_RESULTS_BYTES_PER_CALL,
    MAX_RESULTS_PER_CALL,
    MAX_WAIT_MS,
)


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


class Limits(BaseModel):
    """What this server accepts per call; a runner stays inside them."""

    max_jobs_per_lease: int = MAX_JOBS_PER_LEASE
    max_results_per_call: int = MAX_RESULTS_PER_CALL
    max_bytes_per_call: int = MAX_RESULTS_BYTES_PER_CALL
    max_log_lines_per_call: int = MAX_LOG_LINES_PER_CALL
    max_wait_ms: int = MAX_WAIT_MS


class Hello(BaseModel):
    runner_id: int
    label: str
    owner: str
    server_protocol: int
    update_required: bool
    limits: Limits = Field(default_factory=Limits)


class ToolFailure(BaseModel):
    """The structured content of a tool error. `retryable` says the server's own trouble
    (database unavailable or locked, a deadlock) refused the call: send it again later. Any
    other error is final."""

    code: str
    message: str
    retryable: bool = False
