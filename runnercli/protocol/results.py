"""What the runner reports for a case: its result and the fingerprint of where it ran."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from runnercli.protocol.limits import (
    MAX_ARTIFACT_PATH_CHARS,
    MAX_ARTIFACTS_PER_RESULT,
    MAX_FINGERPRINT_TOOLS,
    MAX_LOG_LINE_BYTES,
    MAX_LOG_TAIL_LINES,
    MAX_OUTPUT_BYTES,
    MAX_RUNNER_INFO_CHARS,
    MAX_RUNNERCLI_VERSION_CHARS,
    MAX_STDERR_TAIL_BYTES,
    MAX_TOOL_VERSION_CHARS,
)
from runnercli.protocol.names import CasePathError, check_case_path
from runnercli.protocol.received import Received
from runnercli.protocol.verifying import (
    MAX_TAMPERED_PATHS,
    Phases,
    Stopped,
    TamperedPath,
    VerifyReport,
)

ToolName = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,39}$")]
ToolVersion = Annotated[str, Field(max_length=MAX_TOOL_VERSION_CHARS)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
MediaType = Annotated[str, Field(max_length=200, pattern=r"^[\w.+-]+/[\w.+-]+$")]


class RepoFingerprint(Received):
    """Which state of the member's repo a case ran on (protocol 3)."""

    name: str = Field(max_length=100)
    sha: str = Field(pattern=r"^[0-9a-f]{7,64}$")
    dirty: bool = False
    base: str = Field(max_length=20)


class ImageFingerprint(Received):
    """A service's container image: its id, and its registry digest when it has one."""

    id: str = Field(max_length=200)
    digest: str = Field(default="", max_length=300)


class ArtifactRef(Received):
    """A file a case left, uploaded as a blob of the job's workspace before the result."""

    path: str = Field(min_length=1, max_length=MAX_ARTIFACT_PATH_CHARS)
    sha256: Sha256
    size: int = Field(ge=0)
    media_type: MediaType = "application/octet-stream"

    @field_validator("path")
    @classmethod
    def _inside(cls, path: str) -> str:
        try:
            normal = check_case_path(path)
        except CasePathError as exc:
            raise ValueError(str(exc)) from exc
        if not normal or normal != path:
            raise ValueError(f"artifact path {path!r} is not a plain relative path")
        return path


class Fingerprint(Received):
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
    # Protocol 3: the repo state, and each service's image by service name.
    repo: RepoFingerprint | None = Field(default=None, exclude_if=lambda v: v is None)
    images: dict[ToolName, ImageFingerprint] | None = Field(
        default=None, exclude_if=lambda v: v is None, max_length=16
    )
    # An agent CLI's configuration: `clean` (a fresh one holding the member's login alone),
    # `member` (theirs), or `member (login not carried)` when clean could not be.
    agent_config: str | None = Field(
        default=None, exclude_if=lambda v: v is None, max_length=MAX_RUNNER_INFO_CHARS
    )
    # Per agent CLI, digests (never contents) of the configuration it ran with: `settings`,
    # `instructions`, and the names of its `hooks`, `plugins`, `mcp_servers` ("" for none).
    agent_settings: dict[ToolName, dict[ToolName, Annotated[str, Field(max_length=64)]]] | None = (
        Field(default=None, exclude_if=lambda v: v is None, max_length=4)
    )


class CaseResult(Received):
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
    # Protocol 3: the files it left, each a blob the server must already hold.
    artifacts: list[ArtifactRef] | None = Field(
        default=None, exclude_if=lambda v: v is None, max_length=MAX_ARTIFACTS_PER_RESULT
    )
    # Protocol 4: what the verifier said, the protected paths the agent changed, what stopped
    # the agent, and the time each phase took.
    verify: VerifyReport | None = Field(default=None, exclude_if=lambda v: v is None)
    tampered: list[TamperedPath] | None = Field(
        default=None, exclude_if=lambda v: v is None, max_length=MAX_TAMPERED_PATHS
    )
    stopped: Stopped | None = Field(default=None, exclude_if=lambda v: v is None)
    phases: Phases | None = Field(default=None, exclude_if=lambda v: v is None)

    @model_validator(mode="after")
    def _bounded(self) -> CaseResult:
        if len(self.output.encode()) > MAX_OUTPUT_BYTES:
            raise ValueError(f"output exceeds {MAX_OUTPUT_BYTES} bytes")
        if len(self.stderr_tail.encode()) > MAX_STDERR_TAIL_BYTES:
            raise ValueError(f"stderr_tail exceeds {MAX_STDERR_TAIL_BYTES} bytes")
        if self.usage is not None and len(repr(self.usage)) > 16 * 1024:
            raise ValueError("usage exceeds 16 KiB")
        paths = [artifact.path for artifact in self.artifacts or []]
        if len(set(paths)) != len(paths):
            raise ValueError("artifacts name the same path twice")
        return self


class ResultReport(Received):
    """One result of a batch (`submit_job_results`): its fence and what the case returned."""

    job_id: int
    lease_epoch: int
    result: CaseResult

    @property
    def size(self) -> int:
        return len(self.result.output.encode()) + len(self.result.stderr_tail.encode())
