"""The agent CLIs a harness may name, pinned: the versions the project's tests run for real.

Written once, read by `make agent-deps` (what to install under `var/node`), by the tests
(where the native binaries are) and by a member's `doctor` (whether the `claude` or `codex`
on their PATH is a version these were checked against). Both CLIs are npm wrappers around a
native binary shipped in a platform package; the tests call that binary directly, since the
wrappers' install scripts (which would link it) are not run.

Beside each pin, what was verified on it (docs/agents.md has the table, `tests/agentclis` the
proof): the flags of each `permissions` value, where its login lives when its configuration
directory moves, the flags that leave a member's own settings out, and how it says a plan
limit was hit, with the reset time.
"""

from __future__ import annotations

import json
import os
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
    and version, where its platform package puts the native binary, and what was verified on
    that version."""

    cli: str
    tool: str
    package: str
    version: str
    binaries: dict[tuple[str, str], tuple[str, str]]
    # The flags of each `permissions` value, and what `bypass` needs set when run as root.
    permissions: dict[str, tuple[str, ...]]
    bypass_root_env: dict[str, str]
    # The variable that moves its configuration directory, and its login's file there.
    config_env: str
    login_file: str
    # With a fresh configuration directory holding only the login: the flags that leave out
    # what a member configured elsewhere (the repo's own project files stay).
    clean_flags: tuple[str, ...]
    # A line of its output saying a plan limit was hit; group `reset` is when it resets, as
    # printed in the runner's local time.
    plan_limit_regex: str

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


# Claude Code's sandbox (bubblewrap on Linux) runs its Bash commands with only the working
# directory writable, so they need no approval; without a working sandbox it refuses to start
# rather than run them unconfined.
CLAUDE_SANDBOX_SETTINGS = (
    '{"sandbox":{"enabled":true,"autoAllowBashIfSandboxed":true,"failIfUnavailable":true}}'
)

CLAUDE_CODE = AgentCli(
    cli="claude-code",
    tool="claude",
    package="@anthropic-ai/claude-code",
    version="2.1.197",
    binaries=_CLAUDE_BINARIES,
    permissions={
        "worktree": ("--permission-mode", "acceptEdits", "--settings", CLAUDE_SANDBOX_SETTINGS),
        "bypass": ("--dangerously-skip-permissions",),
    },
    # As root it refuses to skip permissions unless told it runs in a sandbox.
    bypass_root_env={"IS_SANDBOX": "1"},
    config_env="CLAUDE_CONFIG_DIR",
    login_file=".credentials.json",
    clean_flags=("--setting-sources", "project,local"),
    # A subscription login's limit: "You've hit your session limit · resets 6:59pm (UTC)",
    # "… weekly limit · resets Dec 6, 4:59pm (UTC)", "… resets 7pm (UTC)".
    plan_limit_regex=(
        r"You've hit your (?P<limit>[A-Za-z ]+?) limit · resets "
        r"(?P<reset>(?:[A-Z][a-z]{2} \d{1,2}, )?\d{1,2}(?::\d{2})?[ap]m)"
    ),
)
CODEX = AgentCli(
    cli="codex",
    tool="codex",
    package="@openai/codex",
    version="0.169.0",
    binaries=_CODEX_BINARIES,
    permissions={
        # `codex exec` never asks for approval, whatever config.toml says.
        "worktree": ("--sandbox", "workspace-write"),
        "bypass": ("--dangerously-bypass-approvals-and-sandbox",),
    },
    bypass_root_env={},
    config_env="CODEX_HOME",
    login_file="auth.json",
    clean_flags=("--ignore-user-config",),
    # "You've hit your usage limit. … or try again at 6:56 PM." (or "at Dec 6th, 2026 4:56 PM"),
    # its apostrophe a right single quotation mark (U+2019).
    plan_limit_regex=(
        r"You(?:\x{2019}|')ve hit your usage limit\..*try again at "
        r"(?P<reset>(?:[A-Z][a-z]{2} \d{1,2}(?:st|nd|rd|th), \d{4} )?\d{1,2}:\d{2} [AP]M)"
    ),
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


def installed_problem(node_prefix: str | Path) -> str | None:
    """Why the pinned CLIs are not installed as pinned under an npm prefix (a package missing
    or of another version, its native binary absent); None when they are."""
    prefix = Path(node_prefix)
    for agent in AGENT_CLIS:
        manifest = prefix / "node_modules" / agent.package / "package.json"
        try:
            version = json.loads(manifest.read_text()).get("version")
        except (OSError, ValueError):
            return f"{agent.package} is not installed under {prefix}"
        if version != agent.version:
            return f"{agent.package} {version} is installed under {prefix}, not {agent.version}"
        try:
            binary = agent.binary(prefix)
        except LookupError as unsupported:
            return str(unsupported)
        if not os.access(binary, os.X_OK):
            return f"{agent.npm_spec} has no native binary at {binary}"
    return None
