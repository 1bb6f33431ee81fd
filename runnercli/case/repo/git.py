"""Running git for the runner: argv lists, never a shell, in an environment of our own.

The runner may be started from anywhere, even from a git hook, whose `GIT_DIR`,
`GIT_INDEX_FILE` and friends would point every command at another repository; those are
dropped. Hooks and the file-system monitor of the member's checkout are switched off for our
commands (a `post-checkout` hook runs the member's tooling, not the case's), and no command
ever asks for a password.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# Variables that redirect git to another repository, index or object store.
_REPO_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_PREFIX",
)
_OPTIONS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")
# The commits `git stash create` makes carry a name; a member without `user.email` set must
# not see "please tell me who you are" instead of a case.
_IDENTITY = {
    "GIT_AUTHOR_NAME": "everdict runner",
    "GIT_AUTHOR_EMAIL": "runner@everdict.invalid",
    "GIT_COMMITTER_NAME": "everdict runner",
    "GIT_COMMITTER_EMAIL": "runner@everdict.invalid",
}


class GitError(Exception):
    """A git command failed; the message says which and what git said."""


@dataclass(frozen=True)
class GitResult:
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace").strip()


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment our git commands run in."""
    env = {key: value for key, value in os.environ.items() if key not in _REPO_VARIABLES}
    env.update(_IDENTITY, GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C")
    env.update(extra or {})
    return env


def git_argv(directory: Path | str, *args: str) -> list[str]:
    return ["git", "-C", str(directory), *_OPTIONS, *args]


def _failure(args: tuple[str, ...], result: GitResult) -> GitError:
    said = result.stderr.decode("utf-8", "replace").strip().splitlines()
    detail = said[-1] if said else f"exit status {result.returncode}"
    return GitError(f"git {' '.join(args)} failed: {detail}")


async def git(
    directory: Path | str,
    *args: str,
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> GitResult:
    """Run `git -C directory args…` to completion; raise GitError on failure when `check`."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *git_argv(directory, *args),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=git_env(env),
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed (not found on PATH)") from exc
    stdout, stderr = await proc.communicate()
    result = GitResult(proc.returncode or 0, stdout, stderr)
    if check and result.returncode != 0:
        raise _failure(args, result)
    return result


def git_sync(directory: Path | str, *args: str) -> GitResult:
    """`git()` for the command line, which has no event loop; never raises for an exit status."""
    try:
        done = subprocess.run(
            git_argv(directory, *args),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            env=git_env(),
            check=False,
        )
    except FileNotFoundError as exc:
        raise GitError("git is not installed (not found on PATH)") from exc
    return GitResult(done.returncode, done.stdout, done.stderr)
