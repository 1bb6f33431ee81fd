"""The wire contract between the server and the runner: one definition, both sides.

Imports nothing of the server; the server imports it from here. Models the server
receives forbid extra fields, so a runner cannot smuggle in provenance or a score.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

PROTOCOL_VERSION = 1

MAX_OUTPUT_BYTES = 1024 * 1024
MAX_STDERR_TAIL_BYTES = 64 * 1024
MAX_LOG_LINES_PER_CALL = 500
MAX_LOG_LINE_BYTES = 8 * 1024
MAX_STATUS_CHARS = 200
# How many capabilities a runner may declare (pairing, `hello`, `lease_job`), and how long
# one may be.
MAX_CAPABILITIES = 64
MAX_CAPABILITY_CHARS = 40
# `fail_job`'s message: what the server accepts, and what the runner sends of a longer one
# (a reason to show on the job, not a log: the log goes through `report_case_log`).
MAX_FAIL_MESSAGE_CHARS = MAX_STDERR_TAIL_BYTES
FAIL_MESSAGE_CHARS = 4000
# The runner's description of itself in each result (`RunnerInfo`).
MAX_RUNNER_INFO_CHARS = 100
MAX_RUNNERCLI_VERSION_CHARS = 50
MAX_WAIT_MS = 30_000
MAX_JOBS_PER_LEASE = 32
MAX_RESULTS_PER_CALL = MAX_JOBS_PER_LEASE
# What one `submit_job_results` call may carry in outputs and stderr tails together.
MAX_RESULTS_BYTES_PER_CALL = 4 * 1024 * 1024

CAPABILITY_RE = re.compile(rf"^[a-z0-9][a-z0-9._-]{{0,{MAX_CAPABILITY_CHARS - 1}}}$")
PLACEHOLDER_RE = re.compile(r"\{(input\.[A-Za-z0-9_.-]+|case\.key)\}")

Capability = Annotated[str, Field(pattern=CAPABILITY_RE.pattern)]


class _Received(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Grader(_Received):
    type: Literal["exact", "contains", "regex", "json_equals", "exit_code"]
    field: str | None = Field(default=None, max_length=200)


class HarnessSpec(_Received):
    """How to run one case: an argv (never a shell), its environment, limits and grader."""

    command: list[Annotated[str, Field(max_length=4096)]] = Field(min_length=1, max_length=256)
    env: dict[str, Annotated[str, Field(max_length=4096)]] = Field(default_factory=dict)
    timeout_s: int = Field(default=600, ge=1, le=24 * 3600)
    capabilities: list[Capability] = Field(default_factory=list, max_length=32)
    output: Literal["text", "json"] = "text"
    grader: Grader = Field(default_factory=lambda: Grader(type="exact"))

    @field_validator("command")
    @classmethod
    def _program_is_named(cls, command: list[str]) -> list[str]:
        if not command[0].strip():
            raise ValueError("command[0] must name a program")
        return command

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str]) -> dict[str, str]:
        for name in env:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name):
                raise ValueError(f"invalid environment variable name: {name!r}")
        return env


class CaseRef(BaseModel):
    key: str
    input: Any = None


class HarnessRef(BaseModel):
    name: str
    version: int
    spec: HarnessSpec


class CaseJob(BaseModel):
    """One case to run, as the runner receives it. Never carries the expected answer."""

    job_id: int
    attempt_id: int
    lease_epoch: int
    run_id: int
    workspace: str
    submitted_by: str
    case: CaseRef
    harness: HarnessRef
    capabilities: list[str] = Field(default_factory=list)
    timeout_s: int


class Lease(BaseModel):
    job_id: int
    lease_epoch: int
    lease_ttl_ms: int
    heartbeat_ms: int


class LeaseGrant(BaseModel):
    job: CaseJob
    lease: Lease


class LeaseReply(BaseModel):
    """The reply to `lease_job`. `jobs` is present only when the runner asked for several
    (`max_jobs`): then it lists every grant, the first also being `job`/`lease`; without
    `max_jobs` the reply is the single-job one, unchanged."""

    job: CaseJob | None = None
    lease: Lease | None = None
    update_required: bool = False
    jobs: list[LeaseGrant] | None = Field(default=None, exclude_if=lambda jobs: jobs is None)

    def grants(self) -> list[LeaseGrant]:
        if self.jobs is not None:
            return list(self.jobs)
        if self.job is not None and self.lease is not None:
            return [LeaseGrant(job=self.job, lease=self.lease)]
        return []


class RunnerInfo(_Received):
    os: str = Field(default="", max_length=MAX_RUNNER_INFO_CHARS)
    python: str = Field(default="", max_length=MAX_RUNNER_INFO_CHARS)
    runnercli_version: str = Field(default="", max_length=MAX_RUNNERCLI_VERSION_CHARS)


class CaseResult(_Received):
    """What the runner reports for one case. The server scores it and stamps provenance."""

    status: Literal["completed", "error", "timeout", "canceled"]
    exit_code: int | None = None
    output: str = ""
    stderr_tail: str = ""
    duration_ms: int = Field(default=0, ge=0)
    usage: dict[str, Any] | None = None
    runner_info: RunnerInfo = Field(default_factory=RunnerInfo)

    @model_validator(mode="after")
    def _bounded(self) -> CaseResult:
        if len(self.output.encode()) > MAX_OUTPUT_BYTES:
            raise ValueError(f"output exceeds {MAX_OUTPUT_BYTES} bytes")
        if len(self.stderr_tail.encode()) > MAX_STDERR_TAIL_BYTES:
            raise ValueError(f"stderr_tail exceeds {MAX_STDERR_TAIL_BYTES} bytes")
        if self.usage is not None and len(repr(self.usage)) > 16 * 1024:
            raise ValueError("usage exceeds 16 KiB")
        return self


class ResultReport(_Received):
    """One result of a batch (`submit_job_results`): its fence and what the case returned."""

    job_id: int
    lease_epoch: int
    result: CaseResult

    @property
    def size(self) -> int:
        return len(self.result.output.encode()) + len(self.result.stderr_tail.encode())


class Ack(BaseModel):
    accepted: bool
    reason: str = ""


class BatchAck(BaseModel):
    """The reply to `submit_job_results`: one ack per result, in the order they were sent."""

    acks: list[Ack]


class HeartbeatAck(Ack):
    cancel: bool = False


class Hello(BaseModel):
    runner_id: int
    label: str
    owner: str
    server_protocol: int
    update_required: bool
