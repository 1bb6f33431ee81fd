"""What a harness version is: its spec (an argv, its environment, limits, grader) and its digest."""

from __future__ import annotations

import hashlib
import json
import re
import weakref
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from runnercli.protocol.env import check_env
from runnercli.protocol.limits import MAX_CAPABILITY_CHARS, MAX_PLAIN_CAPABILITY_CHARS
from runnercli.protocol.names import check_globs, check_repo_name, repo_capability
from runnercli.protocol.received import Received
from runnercli.protocol.services import ServiceSpec, check_services
from runnercli.protocol.verifying import LimitsSpec, VerifySpec

# A plain name (`claude`, `docker`), or `repo:OWNER/NAME` for a repo the runner maps.
CAPABILITY_RE = re.compile(
    rf"^(?:[a-z0-9][a-z0-9._-]{{0,{MAX_PLAIN_CAPABILITY_CHARS - 1}}}"
    r"|repo:[a-z0-9][a-z0-9._-]*/[a-z0-9][a-z0-9._-]*)$"
)
# `{case.file}`: the path of the case JSON (always written, whatever its size).
PLACEHOLDER_RE = re.compile(r"\{(input\.[A-Za-z0-9_.-]+|case\.key|case\.file)\}")


def is_capability(name: str) -> bool:
    """Whether `name` is a capability a runner may declare and a harness may need."""
    return len(name) <= MAX_CAPABILITY_CHARS and CAPABILITY_RE.match(name) is not None


Capability = Annotated[str, Field(pattern=CAPABILITY_RE.pattern, max_length=MAX_CAPABILITY_CHARS)]


def _unset(value: object) -> bool:
    return value is None


def _optional(**kwargs: object) -> Any:
    """A protocol-3 key: absent from the spec's JSON (and its digest) while unset."""
    return Field(default=None, exclude_if=_unset, **kwargs)  # type: ignore[call-overload]


class RetryOn(Received):
    """How a harness's tool says "rate limited": an exit code, a stderr line matching
    `stderr_regex`, or (protocol 4) a line of its output matching `output_regex` (RE2; an
    agent CLI prints its plan limit in its stream). The wait comes from a `retry_after_s`
    field of its JSON output, the regex's named group `retry_after` (seconds), or its named
    group `reset` (a clock time as the tool prints it, in the runner's time zone)."""

    exit_codes: list[int] = Field(default_factory=list, max_length=32)
    stderr_regex: str = Field(default="", max_length=1000)
    output_regex: str | None = _optional(max_length=1000)

    @model_validator(mode="after")
    def _says_something(self) -> RetryOn:
        if not self.exit_codes and not self.stderr_regex and not self.output_regex:
            raise ValueError("retry_on needs exit_codes, a stderr_regex or an output_regex")
        return self


class JudgeCommand(Received):
    """The judge a `judge` grader runs on the member's machine, like a harness's command."""

    command: list[Annotated[str, Field(max_length=4096)]] = Field(min_length=1, max_length=256)
    capabilities: list[Capability] = Field(default_factory=list, max_length=32)
    timeout_s: int = Field(default=300, ge=1, le=3600)

    @field_validator("command")
    @classmethod
    def _program_is_named(cls, command: list[str]) -> list[str]:
        if not command[0].strip():
            raise ValueError("judge.command[0] must name a program")
        return command


class Grader(Received):
    # `verify` (protocol 4): the verifier's outcome decides (the server reads it).
    type: Literal["exact", "contains", "regex", "json_equals", "exit_code", "judge", "verify"]
    field: str | None = Field(default=None, max_length=200)
    # A `judge` grader (protocol 3): a rubric, the judge's command, and how many judges vote.
    rubric: str | None = _optional(max_length=20_000)
    judge: JudgeCommand | None = _optional()
    votes: Literal[1, 3] | None = _optional()

    @model_validator(mode="after")
    def _judge_keys(self) -> Grader:
        judging = self.type == "judge"
        if judging and (not self.rubric or self.judge is None):
            raise ValueError("a judge grader needs a rubric and a judge: {command, capabilities}")
        if not judging and (self.rubric, self.judge, self.votes) != (None, None, None):
            raise ValueError("rubric, judge and votes are for a grader of type judge")
        return self


class RepoSpec(Received):
    """The member's checkout a case runs in, as a worktree of its own (protocol 3)."""

    name: str = Field(max_length=100)
    ref: Literal["head", "working", "run"] = "head"

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        return check_repo_name(name)


Output = Literal["text", "json", "claude-stream-json", "codex-jsonl"]
# The outputs whose stdout the runner parses as an agent's event stream.
STREAM_OUTPUTS = ("claude-stream-json", "codex-jsonl")


class HarnessSpec(Received):
    """How to run one case: an argv (never a shell), its environment, limits and grader.

    Protocol 3 adds keys that are absent while unset — `repo`, `artifacts`, `services`,
    `slots` — so a spec that sets none of them keeps its JSON and its digest.
    """

    command: list[Annotated[str, Field(max_length=4096)]] = Field(min_length=1, max_length=256)
    env: dict[str, Annotated[str, Field(max_length=4096)]] = Field(default_factory=dict)
    timeout_s: int = Field(default=600, ge=1, le=24 * 3600)
    capabilities: list[Capability] = Field(default_factory=list, max_length=32)
    output: Output = "text"
    grader: Grader = Field(default_factory=lambda: Grader(type="exact"))
    retry_on: RetryOn | None = _optional()
    repo: RepoSpec | None = _optional()
    artifacts: list[Annotated[str, Field(max_length=200)]] | None = _optional(max_length=32)
    services: dict[str, ServiceSpec] | None = _optional()
    # How many of the runner's `--max-concurrent` slots one case takes (a browser case: 2).
    slots: int | None = _optional(ge=1, le=16)
    # Protocol 4: the verifier, the paths the agent must not change and what a change does,
    # budgets stopping the agent, and whether an agent CLI runs with the member's own
    # configuration or a clean one carrying only their login.
    verify: VerifySpec | None = _optional()
    protect: list[Annotated[str, Field(max_length=200)]] | None = _optional(max_length=32)
    on_tamper: Literal["fail", "flag"] | None = _optional()
    limits: LimitsSpec | None = _optional()
    agent_config: Literal["member", "clean"] | None = _optional()

    @field_validator("command")
    @classmethod
    def _program_is_named(cls, command: list[str]) -> list[str]:
        if not command[0].strip():
            raise ValueError("command[0] must name a program")
        return command

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        return check_env(env, info)

    @field_validator("artifacts")
    @classmethod
    def _globs(cls, artifacts: list[str] | None) -> list[str] | None:
        return None if artifacts is None else check_globs(artifacts)

    @field_validator("protect")
    @classmethod
    def _protected(cls, protect: list[str] | None) -> list[str] | None:
        return None if protect is None else check_globs(protect, "protect")

    @field_validator("services")
    @classmethod
    def _services(cls, services: dict[str, ServiceSpec] | None) -> dict[str, ServiceSpec] | None:
        return None if services is None else check_services(services)

    @model_validator(mode="after")
    def _repo_for_repo_services(self) -> HarnessSpec:
        if self.repo is None and any(s.cwd == "repo" for s in (self.services or {}).values()):
            raise ValueError("a service with cwd: repo needs the harness's repo")
        return self

    @model_validator(mode="after")
    def _verifying_needs_repo(self) -> HarnessSpec:
        if self.repo is None:
            for key in ("verify", "protect", "on_tamper"):
                if getattr(self, key) is not None:
                    raise ValueError(f"{key} needs the harness's repo: it acts on its worktree")
        if self.on_tamper is not None and self.protect is None:
            raise ValueError("on_tamper needs protect: the paths the agent must not change")
        return self

    @model_validator(mode="after")
    def _limits_the_stream_can_tell(self) -> HarnessSpec:
        limits = self.limits
        if limits is not None and limits.max_cost_usd is not None and self.output == "codex-jsonl":
            raise ValueError(
                "limits.max_cost_usd cannot be enforced on codex-jsonl: Codex reports no cost "
                "(use max_tokens or max_turns)"
            )
        return self

    @model_validator(mode="after")
    def _verify_grader_has_verifier(self) -> HarnessSpec:
        if self.grader.type == "verify" and self.verify is None:
            raise ValueError("a grader of type verify needs the harness's verify")
        return self

    def required_capabilities(self) -> list[str]:
        """What a runner must have for this harness: its capabilities, `repo:NAME` for its
        repo, `docker` for a container service."""
        needed = set(self.capabilities)
        if self.repo is not None:
            needed.add(repo_capability(self.repo.name))
        if any(service.is_container for service in (self.services or {}).values()):
            needed.add("docker")
        return sorted(needed)


# The keys of protocol 1 and 2 that every digest covers; a later key counts once it is set.
_DIGEST_KEYS = {"command", "env", "timeout_s", "output", "grader"}
_LATER_KEYS = {
    "repo",
    "artifacts",
    "services",
    "slots",
    "verify",
    "protect",
    "on_tamper",
    "limits",
    "agent_config",
}


def harness_digest(spec: HarnessSpec) -> str:
    """The digest of what a harness version executes: the canonical JSON of its argv
    template, environment, timeout, output and grader, and of each later key it sets (repo,
    artifacts, services, slots; verify, protect, on_tamper, limits, agent_config) — SHA-256.
    A key left unset adds nothing, so every digest of a spec without them (and every consent
    pinned to one) stays as it was. Consent pins it; every result's fingerprint carries it."""
    held = _digests.get(id(spec))
    if held is not None and held[0]() is spec and held[1] == _fields_of(spec):
        return held[2]
    keys = _DIGEST_KEYS | {key for key in _LATER_KEYS if getattr(spec, key) is not None}
    content = spec.model_dump(mode="json", include=keys)
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    key = id(spec)
    _digests[key] = (weakref.ref(spec, lambda _: _digests.pop(key, None)), _fields_of(spec), digest)
    return digest


# Each spec's digest, kept while the spec lives (the runner digests a case's harness when
# its consent is checked and again in its result; a lease's cases share one spec), with
# the identity of each field's value when it was taken: a field set since is digested again.
_digests: dict[int, tuple[weakref.ref[HarnessSpec], tuple[int, ...], str]] = {}


def _fields_of(spec: HarnessSpec) -> tuple[int, ...]:
    return tuple(id(value) for value in spec.__dict__.values())
