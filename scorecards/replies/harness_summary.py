"""A harness version as a person reads it: the agent and its model (or the command), the repo,
the grader and what a runner needs — what the Harnesses page shows before its folded JSON."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any

from runnercli.protocol.presets import bypassing
from scorecards.models import HarnessVersion

AGENTS = {"claude-code": "Claude Code", "codex": "Codex"}
# What a raw spec's streamed output says of the CLI behind it.
STREAMS = {"claude-stream-json": "Claude Code", "codex-jsonl": "Codex"}


@dataclass(frozen=True)
class HarnessSummary:
    """The facts of one version, each already words."""

    agent: str
    model: str
    permissions: str
    command: str
    repo: str
    grader: str
    timeout: str
    needs: list[str] = field(default_factory=list)
    artifacts: list[str] = field(default_factory=list)
    limits: str = ""

    @property
    def line(self) -> str:
        """The version in one line, for the list of all versions."""
        parts = [self.agent, self.model, self.permissions, self.repo, self.grader, self.timeout]
        return " · ".join(part for part in parts if part and part != "—")

    @classmethod
    def of(cls, version: HarnessVersion) -> HarnessSummary:
        spec, source = version.spec, version.source or {}
        agent = source.get("agent") if isinstance(source.get("agent"), dict) else None
        command = [str(arg) for arg in spec.get("command", [])]
        return cls(
            agent=_agent(agent, spec),
            model=(agent or {}).get("model") or ("CLI default" if agent else "—"),
            permissions=_permissions(agent, command),
            command=shlex.join(command),
            repo=_repo(spec.get("repo")),
            grader=_grader(spec.get("grader") or {}),
            timeout=f"{spec.get('timeout_s', 600)} s",
            needs=[*version.capabilities, *(f"feature {f}" for f in version.features)],
            artifacts=list(spec.get("artifacts") or []),
            limits=_limits(spec.get("limits") or {}),
        )


def _agent(agent: dict[str, Any] | None, spec: dict[str, Any]) -> str:
    if agent is not None:
        return AGENTS.get(str(agent.get("cli")), str(agent.get("cli")))
    return STREAMS.get(str(spec.get("output")), "command")


def _permissions(agent: dict[str, Any] | None, command: list[str]) -> str:
    if agent is not None:
        return str(agent.get("permissions") or "worktree")
    return "bypass" if bypassing(command) is not None else ""


def _repo(repo: Any) -> str:
    if not isinstance(repo, dict):
        return "—"
    return f"{repo.get('name')} at {repo.get('ref', 'head')}"


def _grader(grader: dict[str, Any]) -> str:
    kind = str(grader.get("type", "exact"))
    if kind == "judge":
        votes = grader.get("votes") or 1
        return f"judge ({votes} vote{'s' if votes != 1 else ''})"
    if grader.get("field"):
        return f"{kind} of {grader['field']}"
    return kind


def _limits(limits: dict[str, Any]) -> str:
    words = {"max_turns": "turns", "max_tokens": "tokens", "max_cost_usd": "USD"}
    said = [f"{limits[key]} {word}" for key, word in words.items() if limits.get(key)]
    return ", ".join(said)
