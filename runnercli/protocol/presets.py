"""Agent presets: a harness that says `"agent": {"cli": "claude-code", ...}` instead of an argv.

The server expands a preset once, when the version is created: the stored spec is the
expansion (the argv with the CLI's flags for the chosen permissions, its streamed output,
the `retry_on` that recognises its plan-limit message), so the digest, the consent question
and the harness page show exactly what runs; what the author wrote is kept beside it as the
version's source and never sent to a runner. `runnercli push` expands the same way to refuse
a bad file before anything is sent. The flags are those verified on the pinned CLIs
(`runnercli.protocol.agents`, docs/agents.md).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from runnercli.protocol.agents import AGENT_CLIS, CLAUDE_CODE, CODEX, AgentCli
from runnercli.protocol.received import Received
from runnercli.protocol.spec import HarnessSpec

Permissions = Literal["worktree", "bypass"]
# The keys the expansion writes: an author who sets one beside `agent` would be overridden
# without knowing it, so it is refused instead.
EXPANDED_KEYS = ("command", "output", "retry_on")
# The CLIs' own words for the streamed output a harness's `output` names.
_OUTPUTS = {CLAUDE_CODE.cli: "claude-stream-json", CODEX.cli: "codex-jsonl"}
# A prompt is one argv element of the expansion, which the spec bounds at 4,096 characters.
MAX_PROMPT_CHARS = 4000
MODEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@\[\]-]*")


class AgentPreset(Received):
    """What an author writes to run an agent CLI on a case: which CLI, the prompt (with the
    case's placeholders), the model, and how much it may do without asking."""

    cli: Literal["claude-code", "codex"]
    prompt: str = Field(default="{input.prompt}", min_length=1, max_length=MAX_PROMPT_CHARS)
    model: str | None = Field(default=None, max_length=200)
    permissions: Permissions = "worktree"

    @field_validator("model")
    @classmethod
    def _model_name(cls, model: str | None) -> str | None:
        # It is the value of the CLI's model flag: never something read as a flag.
        if model is not None and not MODEL_RE.fullmatch(model):
            raise ValueError(
                "a model name is letters, digits and . _ : / @ [ ] -, starting with a letter "
                "or digit"
            )
        return model

    @property
    def agent(self) -> AgentCli:
        return next(agent for agent in AGENT_CLIS if agent.cli == self.cli)


class _Preset(BaseModel):
    # Wrapped, so that a refusal's location starts with `agent.`.
    agent: AgentPreset


def is_preset(source: Any) -> bool:
    """Whether a harness as written names an agent preset rather than a command."""
    return isinstance(source, Mapping) and "agent" in source


def _command(
    preset: AgentPreset, max_turns: int | None, max_cost_usd: float | None = None
) -> list[str]:
    agent = preset.agent
    flags = list(agent.permissions[preset.permissions])
    if agent is CLAUDE_CODE:
        # `-p` prints; the prompt is its positional argument. stream-json needs --verbose.
        argv = [agent.tool, "-p", "--output-format", "stream-json", "--verbose", *flags]
        if preset.model is not None:
            argv += ["--model", preset.model]
        if max_turns is not None:
            argv += ["--max-turns", str(max_turns)]
        if max_cost_usd is not None:
            argv += ["--max-budget-usd", f"{max_cost_usd:g}"]
    else:
        # Codex keeps no session files (`--ephemeral`) and runs outside a git checkout too.
        argv = [agent.tool, "exec", "--json", "--skip-git-repo-check", "--ephemeral", *flags]
        if preset.model is not None:
            argv += ["-m", preset.model]
    # `--` ends the options: a prompt starting with `-` is still the prompt (both CLIs).
    return [*argv, "--", preset.prompt]


def expand(source: Mapping[str, Any]) -> HarnessSpec:
    """The spec a harness written with `agent` runs: its argv, streamed output, plan-limit
    `retry_on` and the CLI's capability, beside the author's other keys (repo, artifacts,
    timeout_s, grader, limits, agent_config, …). Raise pydantic's ValidationError (locations
    as written: `agent.cli`, `timeout_s`) or ValueError for a key the expansion writes."""
    written = [key for key in EXPANDED_KEYS if key in source]
    if written:
        raise ValueError(
            f"{', '.join(written)}: the agent preset writes "
            f"{'it' if len(written) == 1 else 'them'}; leave {', '.join(written)} out"
        )
    preset = _Preset.model_validate({"agent": source["agent"]}).agent
    rest = {key: value for key, value in source.items() if key != "agent"}
    capabilities = rest.get("capabilities", [])
    if isinstance(capabilities, list) and preset.agent.tool not in capabilities:
        rest["capabilities"] = [preset.agent.tool, *capabilities]
    rest["output"] = _OUTPUTS[preset.cli]
    # The CLI prints its plan limit in its stream; the runner hands the case back and pauses
    # until the `reset` the line states.
    rest["retry_on"] = {"output_regex": preset.agent.plan_limit_regex}
    rest["command"] = _command(preset, None)
    spec = HarnessSpec.model_validate(rest)
    max_turns = spec.limits.max_turns if spec.limits is not None else None
    max_cost = spec.limits.max_cost_usd if spec.limits is not None else None
    if (max_turns is not None or max_cost is not None) and preset.agent is CLAUDE_CODE:
        rest["command"] = _command(preset, max_turns, max_cost)
        spec = HarnessSpec.model_validate(rest)
    return spec


def _program(command: list[str]) -> str:
    return PurePath(command[0]).name.lower().removesuffix(".exe") if command else ""


def bypassing(command: list[str]) -> AgentCli | None:
    """The agent CLI this argv runs with every permission bypassed, if it does."""
    # Only the options count: a prompt after `--` that reads like a flag is a prompt.
    options = command[: command.index("--")] if "--" in command else command
    for agent in AGENT_CLIS:
        flags = agent.permissions["bypass"]
        if _program(options) == agent.tool and all(flag in options for flag in flags):
            return agent
    return None


def root_env(command: list[str]) -> dict[str, str]:
    """What the runner adds to a case's environment for a CLI run with `bypass` as root:
    Claude Code refuses to skip permissions as root unless told it runs in a sandbox."""
    agent = bypassing(command)
    if agent is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        return {}
    return dict(agent.bypass_root_env)
