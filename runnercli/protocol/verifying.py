"""Protocol 4: whether the agent's change worked, and what stopped it.

A harness with a `repo` may name a verifier (`verify`), paths the agent must not change
(`protect`, `on_tamper`) and budgets (`limits`); a case may carry hidden files, written into
the worktree only once the agent has ended. The runner reports what the verifier said, what
the agent changed under protected paths, what stopped it and how long each phase took; the
server decides the verdict from them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from runnercli.protocol.env import check_env
from runnercli.protocol.names import CasePathError, check_case_path
from runnercli.protocol.received import Received

# A case's hidden files: how many, and their bytes together (the job carries them).
MAX_HIDDEN_FILES = 64
MAX_HIDDEN_BYTES = 1024 * 1024
# The verifier's report (JUnit XML or JSON), as the runner reads it, and what it sends of it.
MAX_REPORT_BYTES = 4 * 1024 * 1024
MAX_REPORT_TESTS = 5000
MAX_TEST_NAME_CHARS = 500
MAX_VERIFY_TAIL_BYTES = 16 * 1024
MAX_TAMPERED_PATHS = 200

VerifyOutput = Literal["exit_code", "json", "junit"]
TamperChange = Literal["added", "modified", "deleted", "renamed", "mode", "symlink"]


def check_worktree_path(path: str, what: str) -> str:
    """Return `path` if it is a plain relative path inside the worktree; raise ValueError."""
    try:
        normal = check_case_path(path)
    except CasePathError as exc:
        raise ValueError(f"{what}: {exc}") from exc
    if not normal or normal != path:
        raise ValueError(f"{what}: {path!r} is not a plain relative path")
    return path


class VerifySpec(Received):
    """The verifier: run in the case's worktree after the agent has ended, its protected
    paths restored and its hidden files written, with its own timeout."""

    command: list[Annotated[str, Field(max_length=4096)]] = Field(min_length=1, max_length=256)
    timeout_s: int = Field(default=300, ge=1, le=3600)
    env: dict[str, Annotated[str, Field(max_length=4096)]] = Field(default_factory=dict)
    output: VerifyOutput = "exit_code"
    # Where the verifier writes its report (`junit`; optional for `json`, else its stdout).
    report: str | None = Field(default=None, max_length=1024)

    @field_validator("command")
    @classmethod
    def _program_is_named(cls, command: list[str]) -> list[str]:
        if not command[0].strip():
            raise ValueError("verify.command[0] must name a program")
        return command

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        return check_env(env, info)

    @field_validator("report")
    @classmethod
    def _report_inside(cls, report: str | None) -> str | None:
        return None if report is None else check_worktree_path(report, "verify.report")

    @model_validator(mode="after")
    def _junit_has_report(self) -> VerifySpec:
        if self.output == "junit" and self.report is None:
            raise ValueError(
                "a junit verifier needs its report: the path it writes in the worktree"
            )
        return self


class LimitsSpec(Received):
    """Budgets of one case, enforced on the member's machine from the agent's own stream."""

    max_cost_usd: float | None = Field(default=None, gt=0, le=10_000)
    max_turns: int | None = Field(default=None, ge=1, le=10_000)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000_000)

    @model_validator(mode="after")
    def _says_something(self) -> LimitsSpec:
        if (self.max_cost_usd, self.max_turns, self.max_tokens) == (None, None, None):
            raise ValueError("limits needs max_cost_usd, max_turns or max_tokens")
        return self


def check_hidden_files(files: dict[str, str]) -> dict[str, str]:
    """Return a case's hidden files if they are few, small and inside the worktree."""
    if len(files) > MAX_HIDDEN_FILES:
        raise ValueError(f"hidden_files may hold at most {MAX_HIDDEN_FILES} files")
    size = 0
    for path, content in files.items():
        check_worktree_path(path, "hidden_files")
        if not isinstance(content, str):
            raise ValueError(f"hidden_files: {path!r} must be text")
        size += len(path.encode()) + len(content.encode())
    if size > MAX_HIDDEN_BYTES:
        raise ValueError(f"hidden_files exceed {MAX_HIDDEN_BYTES} bytes")
    return files


TestName = Annotated[str, Field(max_length=MAX_TEST_NAME_CHARS)]


class TestOutcome(Received):
    """The tests a JUnit report names, by outcome (`path::name`, `classname.name` or `name`)."""

    passed: list[TestName] = Field(default_factory=list, max_length=MAX_REPORT_TESTS)
    failed: list[TestName] = Field(default_factory=list, max_length=MAX_REPORT_TESTS)
    errored: list[TestName] = Field(default_factory=list, max_length=MAX_REPORT_TESTS)


class VerifyOutcome(Received):
    """What the runner read of the verifier's answer, as the server decides from it: a `json`
    verifier's `{pass, score, reason}` as written, or a `junit` report's tests."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    passed: bool | None = Field(default=None, alias="pass")
    score: float | None = Field(default=None, ge=0, le=1)
    reason: str = Field(default="", max_length=1000)
    tests: TestOutcome | None = None


class VerifyReport(Received):
    """What the verifier said: its exit code, what was read of its answer (`outcome`), or why
    it could not run or be read (`error`: timed out, a report too large or malformed)."""

    exit_code: int | None = None
    outcome: VerifyOutcome | None = None
    error: str | None = Field(default=None, max_length=1000)
    stdout_tail: str = Field(default="", max_length=MAX_VERIFY_TAIL_BYTES)
    stderr_tail: str = Field(default="", max_length=MAX_VERIFY_TAIL_BYTES)


class TamperedPath(Received):
    path: str = Field(max_length=1024)
    change: TamperChange


class Stopped(Received):
    """The agent was stopped before it ended on its own: by a budget or the timeout."""

    by: Literal["limit", "timeout"]
    # Which limit (`max_cost_usd`, `max_turns`, `max_tokens`) when `by` is `limit`.
    limit: str | None = Field(default=None, max_length=40)
    used: dict[str, float] = Field(default_factory=dict, max_length=8)
    limits: dict[str, float] = Field(default_factory=dict, max_length=8)


class Phases(Received):
    """Seconds spent in each phase of the case."""

    setup_s: float = Field(default=0.0, ge=0)
    agent_s: float = Field(default=0.0, ge=0)
    verify_s: float = Field(default=0.0, ge=0)
    collect_s: float = Field(default=0.0, ge=0)
