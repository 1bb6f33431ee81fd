"""The agent CLIs a harness may name, pinned: the versions the project's tests run for real.

Written once, read by `make agent-deps` (what to install under `var/node`), by the tests
(where the native binaries are) and by a member's `doctor` (whether the `claude` or `codex`
on their PATH is a version these were checked against). Both CLIs are npm wrappers around a
native binary shipped in a platform package; the tests call that binary directly, since the
wrappers' install scripts (which would link it) are not run.
"""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass
from pathlib import Path

# A native binary's path inside its platform package, per (sys.platform, machine).
_CLAUDE_BINARIES: dict[tuple[str, str], tuple[str, str]] = {
    ("linux", "x86_64"): ("@anthropic-ai/claude-code-linux-x64", "claude"),
    ("linux", "aarch64"): ("@anthropic-ai/claude-code-linux-arm64", "claude"),
    ("darwin", "x86_64"): ("@anthropic-ai/claude-code-darwin-x64", "claude"),
    ("darwin", "arm64"): ("@anthropic-ai/claude-code-darwin-arm64", "claude"),
}
_CODEX_BINARIES: dict[tuple[str, str], tuple[str, str]] = {
    ("linux", "x86_64"): (
        "@openai/codex-linux-x64",
        "vendor/x86_64-unknown-linux-musl/bin/codex",
    ),
    ("linux", "aarch64"): (
        "@openai/codex-linux-arm64",
        "vendor/aarch64-unknown-linux-musl/bin/codex",
    ),
    ("darwin", "x86_64"): ("@openai/codex-darwin-x64", "vendor/x86_64-apple-darwin/bin/codex"),
    ("darwin", "arm64"): ("@openai/codex-darwin-arm64", "vendor/aarch64-apple-darwin/bin/codex"),
}


@dataclass(frozen=True)
class AgentCli:
    """One pinned agent CLI: what a harness calls it, the tool it is on PATH, its npm package
    and version, and where its platform package puts the native binary."""

    cli: str
    tool: str
    package: str
    version: str
    binaries: dict[tuple[str, str], tuple[str, str]]

    @property
    def npm_spec(self) -> str:
        return f"{self.package}@{self.version}"

    def binary(self, node_prefix: Path, *, machine: tuple[str, str] | None = None) -> Path:
        """The native binary under an npm prefix (`npm install --prefix node_prefix`)."""
        key = machine or _this_machine()
        if key not in self.binaries:
            raise LookupError(f"{self.package} ships no native binary for {key[0]} {key[1]}")
        package, path = self.binaries[key]
        return node_prefix / "node_modules" / package / path


CLAUDE_CODE = AgentCli(
    cli="claude-code",
    tool="claude",
    package="@anthropic-ai/claude-code",
    version="2.1.197",
    binaries=_CLAUDE_BINARIES,
)
CODEX = AgentCli(
    cli="codex",
    tool="codex",
    package="@openai/codex",
    version="0.169.0",
    binaries=_CODEX_BINARIES,
)
AGENT_CLIS: tuple[AgentCli, ...] = (CLAUDE_CODE, CODEX)


def _this_machine() -> tuple[str, str]:
    machine = platform.machine().lower()
    # Windows says AMD64; Linux says aarch64 where macOS says arm64.
    machine = {"amd64": "x86_64"}.get(machine, machine)
    if sys.platform == "linux" and machine == "arm64":
        machine = "aarch64"
    return sys.platform, machine


def pinned_versions() -> dict[str, str]:
    """The pinned version of each agent CLI, by the tool's name (`claude`, `codex`)."""
    return {agent.tool: agent.version for agent in AGENT_CLIS}


def is_pinned(tool: str, version: str) -> bool | None:
    """Whether an installed tool's version is the pinned one; None for a tool not pinned."""
    pinned = pinned_versions().get(tool)
    return None if pinned is None else version.strip() == pinned


def npm_specs() -> list[str]:
    """`package@version` for every pinned CLI, as `npm install` takes them."""
    return [agent.npm_spec for agent in AGENT_CLIS]
