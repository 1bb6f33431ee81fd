"""The wire contract between the server and the runner: one definition, both sides.

Imports nothing of the server; the server imports it from here. Models the server
receives forbid extra fields, so a runner cannot smuggle in provenance or a score.

Protocol 2 gathers every change of its round in one step: resume and shadow semantics,
`release_job`, `hello.limits`, the case file, `retry_on`, `log_tail` and the fingerprint. A
server whose minimum is 2 answers a protocol-1 runner `update_required` before it ever sees
a spec key it cannot parse.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

PROTOCOL_VERSION = 2

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
# `release_job`'s reason (also the runner's pause reason, shown on the roster).
MAX_RELEASE_REASON_CHARS = 200
# The runner's description of itself in each result (its fingerprint).
MAX_RUNNER_INFO_CHARS = 100
MAX_RUNNERCLI_VERSION_CHARS = 50
MAX_FINGERPRINT_TOOLS = 32
MAX_TOOL_VERSION_CHARS = 200
# The lines a result carries for the case's log (its start and outcome lines), so a short
# case needs no `report_case_log` call of its own.
MAX_LOG_TAIL_LINES = 20
# The longest a long-poll may wait; a server may allow less (`hello.limits.max_wait_ms`).
MAX_WAIT_MS = 55_000
MAX_JOBS_PER_LEASE = 32
MAX_RESULTS_PER_CALL = MAX_JOBS_PER_LEASE
# What one `submit_job_results` call may carry in outputs and stderr tails together.
MAX_RESULTS_BYTES_PER_CALL = 4 * 1024 * 1024

# The case as JSON on the harness's environment only up to this size; it is always in the
# case file. Linux refuses a single environment string or argument over 128 KiB.
MAX_CASE_ENV_BYTES = 64 * 1024
MAX_ARG_BYTES = 128 * 1024

# Environment variables a harness may not set: they change what runs (the loader, the shell,
# an interpreter's start-up, git's programs) rather than configure the tool. The runner
# refuses them again, with any the member adds in its config: a server can lie.
REFUSED_ENV_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "SHELL",
        "IFS",
        "BASH_ENV",
        "ENV",
        "PROMPT_COMMAND",
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "PYTHONUSERBASE",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PERL5LIB",
        "PERL5OPT",
        "RUBYOPT",
        "RUBYLIB",
        "GIT_EXEC_PATH",
        "GIT_SSH",
        "GIT_SSH_COMMAND",
    }
)
REFUSED_ENV_PREFIXES = ("LD_", "DYLD_", "GIT_CONFIG")

CAPABILITY_RE = re.compile(rf"^[a-z0-9][a-z0-9._-]{{0,{MAX_CAPABILITY_CHARS - 1}}}$")
# `{case.file}`: the path of the case JSON (always written, whatever its size).
PLACEHOLDER_RE = re.compile(r"\{(input\.[A-Za-z0-9_.-]+|case\.key|case\.file)\}")

Capability = Annotated[str, Field(pattern=CAPABILITY_RE.pattern)]


class _Received(BaseModel):
    model_config = ConfigDict(extra="forbid")


def refused_env_keys(env: dict[str, str], extra: Iterable[str] = ()) -> list[str]:
    """The keys of `env` a harness may not set (the list above, and `extra`: names, or
    prefixes ending in `*`), sorted. Case does not matter: Windows reads `Path` as `PATH`."""
    extra = [name.upper() for name in extra]
    names = REFUSED_ENV_NAMES | {name for name in extra if not name.endswith("*")}
    prefixes = REFUSED_ENV_PREFIXES + tuple(name[:-1] for name in extra if name.endswith("*"))
    return sorted(k for k in env if k.upper() in names or k.upper().startswith(prefixes))


# The validation context under which the runner parses what the server sends: a spec with a
# refused environment key still parses there, so the runner can refuse the job by name
# (`fail_job`) rather than fail to read the lease it already holds.
RUNNER_CONTEXT = {"received_by": "runner"}


class RetryOn(_Received):
    """How a harness's tool says "rate limited": an exit code, or a stderr line matching
    `stderr_regex` (RE2). The wait comes from a `retry_after_s` field of its JSON output or
    the regex's named group `retry_after` (seconds)."""

    exit_codes: list[int] = Field(default_factory=list, max_length=32)
    stderr_regex: str = Field(default="", max_length=1000)

    @model_validator(mode="after")
    def _says_something(self) -> RetryOn:
        if not self.exit_codes and not self.stderr_regex:
            raise ValueError("retry_on needs exit_codes, a stderr_regex, or both")
        return self


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
    retry_on: RetryOn | None = Field(default=None, exclude_if=lambda retry_on: retry_on is None)

    @field_validator("command")
    @classmethod
    def _program_is_named(cls, command: list[str]) -> list[str]:
        if not command[0].strip():
            raise ValueError("command[0] must name a program")
        return command

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        for name in env:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,127}", name):
                raise ValueError(f"invalid environment variable name: {name!r}")
        if info.context == RUNNER_CONTEXT:
            return env  # the runner refuses the job itself, naming the key
        if refused := refused_env_keys(env):
            raise ValueError(
                f"a harness may not set {', '.join(refused)}: it would change what runs on the "
                "member's machine, not configure the tool"
            )
        return env


def harness_digest(spec: HarnessSpec) -> str:
    """The digest of what a harness version executes: the canonical JSON of its argv
    template, environment, timeout, output and grader (SHA-256). Consent pins it; every
    result's fingerprint carries it."""
    content = spec.model_dump(
        mode="json", include={"command", "env", "timeout_s", "output", "grader"}
    )
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


class CaseRef(BaseModel):
    key: str
    input: Any = None


class HarnessRef(BaseModel):
    name: str
    version: int
    digest: str
    author: str = Field(default="", description="Who wrote this version.")
    spec: HarnessSpec


class CaseJob(BaseModel):
    """One case to run, as the runner receives it. Never carries the expected answer."""

    job_id: int
    attempt_id: int
    lease_epoch: int
    run_id: int
    workspace: str
    submitted_by: str
    repeat: int = 0
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


ToolName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,39}$")]
ToolVersion = Annotated[str, Field(max_length=MAX_TOOL_VERSION_CHARS)]


class Fingerprint(_Received):
    """Where and with what a case ran: the runner, the machine, the harness content executed
    and the versions of the tools behind the harness's capabilities."""

    runnercli_version: str = Field(default="", max_length=MAX_RUNNERCLI_VERSION_CHARS)
    os: str = Field(default="", max_length=MAX_RUNNER_INFO_CHARS)
    os_version: str = Field(default="", max_length=MAX_TOOL_VERSION_CHARS)
    arch: str = Field(default="", max_length=MAX_RUNNER_INFO_CHARS)
    python: str = Field(default="", max_length=MAX_RUNNER_INFO_CHARS)
    harness_digest: str = Field(default="", max_length=64)
    tools: dict[ToolName, ToolVersion] = Field(
        default_factory=dict, max_length=MAX_FINGERPRINT_TOOLS
    )


class CaseResult(_Received):
    """What the runner reports for one case. The server scores it and stamps provenance."""

    status: Literal["completed", "error", "timeout", "canceled"]
    exit_code: int | None = None
    output: str = ""
    stderr_tail: str = ""
    duration_ms: int = Field(default=0, ge=0)
    usage: dict[str, Any] | None = None
    log_tail: list[Annotated[str, Field(max_length=MAX_LOG_LINE_BYTES)]] = Field(
        default_factory=list, max_length=MAX_LOG_TAIL_LINES
    )
    fingerprint: Fingerprint = Field(default_factory=Fingerprint)

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
