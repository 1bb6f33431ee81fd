"""Agent CLIs: what the `worktree` permissions cost a case, beside `bypass` in the same run.

The pinned Claude Code and Codex (`make agent-deps`) each run the same two-turn case N times
against a scripted model endpoint on 127.0.0.1 — one shell command, then a final answer —
once with the `worktree` flags (their commands in bubblewrap) and once with `bypass` (no
sandbox). Median wall time of the whole CLI process, start to exit; a bare spawn of
`/bin/true` is noted for scale. No database: the database arguments are accepted, as
`run_all.py` passes them, and unused.

    .venv/bin/python bench/agent_clis.py [--runs 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from databases import add_database_arguments
from report import Summary, finish

from runnercli.protocol.agents import CLAUDE_CODE, CODEX
from tests.agentclis.anthropic_api import AnthropicEndpoint
from tests.agentclis.clis import (
    AgentHome,
    agent_home,
    claude,
    claude_env,
    claude_print,
    codex_env,
    codex_exec,
    git_repo,
    run,
)
from tests.agentclis.openai_api import ResponsesEndpoint
from tests.agentclis.scripted import Text, ToolCall
from tests.required import agent_clis_problem

# What the sandbox may add to a case that runs one command, at most: its setup is a fixed
# cost per command, not a share of the case.
TARGET_ADDED_MS = 1000.0


def timed(runs: int, once: Callable[[], float]) -> float:
    """The median of `runs` timings, after one run to warm the page cache."""
    once()
    return statistics.median(once() for _ in range(runs))


def claude_case(home: AgentHome, repo: Path, permissions: str) -> Callable[[], float]:
    env_extra = CLAUDE_CODE.bypass_root_env if permissions == "bypass" else {}
    flags = CLAUDE_CODE.permissions[permissions]

    def once() -> float:
        script = [ToolCall("Bash", {"command": "echo hi"}), Text("done")]
        with AnthropicEndpoint(script).serve() as endpoint:
            env = claude_env(home, endpoint.url, **env_extra)
            done = claude(claude_print("Say hi.", *flags), cwd=repo, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.seconds

    return once


def codex_case(home: AgentHome, repo: Path, permissions: str) -> Callable[[], float]:
    flags = CODEX.permissions[permissions]

    def once() -> float:
        script = [ToolCall("exec_command", {"cmd": "echo hi"}), Text("done")]
        with ResponsesEndpoint(script).serve() as endpoint:
            argv = codex_exec(endpoint.url, "Say hi.", *flags)
            done = run(argv, cwd=repo, env=codex_env(home))
        assert done.returncode == 0, done.stdout + done.stderr
        return done.seconds

    return once


def bare_spawn() -> float:
    started = time.monotonic()
    subprocess.run(["/bin/true"], check=True)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each case (10)")
    add_database_arguments(parser)
    args = parser.parse_args()
    summary = Summary("agent CLIs: a one-command case with worktree permissions beside bypass")
    problem = agent_clis_problem()
    if problem:
        summary.notes.append(f"skipped: {problem}")
        finish(summary, args)
        return

    load = os.getloadavg()[0]
    print(f"agent CLIs — {os.cpu_count()} cores, load average {load:.2f} at start")
    spawn_ms = timed(args.runs, bare_spawn) * 1000
    with agent_home() as home:
        repo = git_repo(home.root / "repo", {"hello.txt": "hello\n"})
        for name, case, version in (
            ("Claude Code", claude_case, CLAUDE_CODE.version),
            ("Codex", codex_case, CODEX.version),
        ):
            worktree = timed(args.runs, case(home, repo, "worktree")) * 1000
            bypass = timed(args.runs, case(home, repo, "bypass")) * 1000
            print(f"{name}: worktree {worktree:.0f} ms, bypass {bypass:.0f} ms (median)")
            summary.add(
                benchmark="agent_clis",
                figure=f"{name} {version}, one command, worktree (median of {args.runs})",
                value=f"{worktree:.0f} ms",
                baseline=f"{bypass:.0f} ms: the same case with bypass",
                ratio=f"{worktree / bypass:.2f}x",
                target=f"<= +{TARGET_ADDED_MS:.0f} ms",
                met=worktree - bypass <= TARGET_ADDED_MS,
            )
    summary.notes.append(f"a bare spawn of /bin/true: {spawn_ms:.1f} ms median; no database")
    finish(summary, args)


if __name__ == "__main__":
    main()
