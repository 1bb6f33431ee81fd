"""The pinned agent CLIs, run for real by the tests: where they are, the environment each runs
in, and what it printed.

Each run gets a throwaway home (`AgentHome`) under the checkout's `var/`, never the machine's
`~/.claude` or `~/.codex`, and not under `/tmp`: Codex warns at every call when its home is in
a temporary directory. The environment is built from nothing but PATH, so a developer's own
keys or settings never reach a test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runnercli.protocol.agents import CLAUDE_CODE, CODEX
from tests.required import NODE_DIR, ROOT

CLAUDE = CLAUDE_CODE.binary(NODE_DIR)
CODEX_BIN = CODEX.binary(NODE_DIR)
HOMES = ROOT / "var" / "test-agent-homes"
# A model from Codex's own catalog (`codex debug models`): an unknown one changes its tools.
CODEX_MODEL = "gpt-5.5"
RUN_TIMEOUT_S = 60


@dataclass(frozen=True)
class AgentHome:
    """A member's machine in miniature: HOME, Claude Code's and Codex's configuration."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def claude_config(self) -> Path:
        return self.home / ".claude"

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"

    @property
    def temporary(self) -> Path:
        """The CLIs' temporary directory: Codex refuses to make its helper binaries (its
        sandbox among them) in a home under the temporary directory, and a checkout may
        itself lie under /tmp."""
        return self.root / "tmp"


@contextmanager
def agent_home() -> Iterator[AgentHome]:
    made = AgentHome(HOMES / uuid.uuid4().hex[:12])
    for path in (made.home, made.claude_config, made.codex_home, made.temporary):
        path.mkdir(parents=True)
    try:
        yield made
    finally:
        shutil.rmtree(made.root, ignore_errors=True)


@dataclass(frozen=True)
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def events(self) -> list[dict[str, Any]]:
        """The JSON lines the CLI printed on stdout."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.startswith("{")]

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [event for event in self.events if event.get("type") == kind]

    @property
    def init(self) -> dict[str, Any]:
        """Claude Code's `system`/`init` line (a SessionStart hook's lines may come first)."""
        return next(e for e in self.of_type("system") if e.get("subtype") == "init")

    @property
    def result(self) -> dict[str, Any]:
        """Claude Code's final `result` line."""
        results = self.of_type("result")
        assert len(results) == 1, f"expected one result line:\n{self.stdout}\n{self.stderr}"
        return results[0]


def base_env(home: AgentHome, **extra: str | None) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home.home),
        "LANG": "C.UTF-8",
        "TZ": "UTC",
    }
    for name, value in extra.items():
        if value is not None:
            env[name] = value
    return env


def claude_env(
    home: AgentHome,
    endpoint_url: str,
    *,
    api_key: str | None = "sk-ant-scripted",
    **extra: str | None,
) -> dict[str, str]:
    """Claude Code against a scripted endpoint, with an API key (or, with `api_key=None`,
    whatever login its configuration directory holds)."""
    settings: dict[str, str | None] = {
        "CLAUDE_CONFIG_DIR": str(home.claude_config),
        "ANTHROPIC_BASE_URL": endpoint_url,
        "ANTHROPIC_API_KEY": api_key,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    return base_env(home, **{**settings, **extra})


def codex_env(home: AgentHome, **extra: str | None) -> dict[str, str]:
    settings = {
        "CODEX_HOME": str(home.codex_home),
        "SCRIPTED_KEY": "sk-scripted",
        "TMPDIR": str(home.temporary),
    }
    return base_env(home, **{**settings, **extra})


def codex_provider(endpoint_url: str, *, login: bool = False, retries: bool = False) -> list[str]:
    """`-c` flags that point Codex at a scripted endpoint: a custom provider whose key is
    `SCRIPTED_KEY`, or (`login=True`) whose credentials are the login in CODEX_HOME/auth.json.
    Without `retries` it tries each request once, as the tests want their errors at once."""
    auth = "requires_openai_auth=true" if login else 'env_key="SCRIPTED_KEY"'
    limits = "" if retries else ",request_max_retries=0,stream_max_retries=0"
    provider = (
        f'{{name="scripted",base_url="{endpoint_url}/v1",wire_api="responses",{auth}{limits}}}'
    )
    return ["-c", "model_provider=scripted", "-c", f"model_providers.scripted={provider}"]


def run(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float = RUN_TIMEOUT_S) -> Run:
    """Run a CLI to its end, stdin closed (Codex would otherwise wait for more input)."""
    started = time.monotonic()
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return Run(done.returncode, done.stdout, done.stderr, time.monotonic() - started)


def claude(args: list[str], *, cwd: Path, env: dict[str, str], **kwargs: Any) -> Run:
    return run([str(CLAUDE), *args], cwd=cwd, env=env, **kwargs)


def claude_print(prompt: str, *flags: str) -> list[str]:
    """Print mode with the stream a harness reads: every message, tool call and result."""
    return ["-p", prompt, "--output-format", "stream-json", "--verbose", *flags]


def codex_exec(
    endpoint_url: str, prompt: str, *flags: str, login: bool = False, retries: bool = False
) -> list[str]:
    return [
        str(CODEX_BIN),
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--ephemeral",
        *codex_provider(endpoint_url, login=login, retries=retries),
        "-m",
        CODEX_MODEL,
        *flags,
        prompt,
    ]


def git_repo(path: Path, files: dict[str, str]) -> Path:
    """A repository with `files` committed: the case's worktree."""
    path.mkdir(parents=True)
    for name, content in files.items():
        (path / name).write_text(content)
    identity = ["-c", "user.name=Member", "-c", "user.email=member@example.com"]
    for args in (["init", "--quiet"], ["add", "--all"], ["commit", "--quiet", "-m", "start"]):
        subprocess.run(["git", "-C", str(path), *identity, *args], check=True)
    return path


def git_status(path: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(path), "status", "--short"], capture_output=True, text=True, check=True
    )
    return done.stdout
