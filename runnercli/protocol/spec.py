"""What a harness version is: its spec (an argv, its environment, limits, grader) and its digest."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from runnercli.protocol.env import refused_env_keys
from runnercli.protocol.limits import MAX_CAPABILITY_CHARS

CAPABILITY_RE = re.compile(rf"^[a-z0-9][a-z0-9._-]{{0,{MAX_CAPABILITY_CHARS - 1}}}$")
# `{case.file}`: the path of the case JSON (always written, whatever its size).
PLACEHOLDER_RE = re.compile(r"\{(input\.[A-Za-z0-9_.-]+|case\.key|case\.file)\}")

Capability = Annotated[str, Field(pattern=CAPABILITY_RE.pattern)]


class Received(BaseModel):
    """A model the server receives: an unknown field is refused, never ignored."""

    model_config = ConfigDict(extra="forbid")


# The validation context under which the runner parses what the server sends: a spec with a
# refused environment key still parses there, so the runner can refuse the job by name
# (`fail_job`) rather than fail to read the lease it already holds.
RUNNER_CONTEXT = {"received_by": "runner"}


class RetryOn(Received):
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


class Grader(Received):
    type: Literal["exact", "contains", "regex", "json_equals", "exit_code"]
    field: str | None = Field(default=None, max_length=200)


class HarnessSpec(Received):
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
