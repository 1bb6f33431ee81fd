"""What a run started from CI says about where it came from: git SHA, branch, dirty flag and
the CI job's URL, and the `--metadata KEY=VALUE` pairs given."""

from __future__ import annotations

import subprocess
from typing import Any

import click


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def ci_url(env: dict[str, str]) -> str | None:
    """The URL of this CI job, from the variables GitHub Actions, GitLab, Buildkite,
    CircleCI or Jenkins set."""
    if env.get("GITHUB_RUN_ID") and env.get("GITHUB_REPOSITORY"):
        base = env.get("GITHUB_SERVER_URL", "https://github.com")
        return f"{base}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
    for name in ("CI_JOB_URL", "BUILDKITE_BUILD_URL", "CIRCLE_BUILD_URL", "BUILD_URL"):
        if env.get(name):
            return env[name]
    return None


def detected_metadata(env: dict[str, str]) -> dict[str, Any]:
    """git SHA, branch and dirty flag of the working directory, and the CI job's URL."""
    found: dict[str, Any] = {}
    sha = env.get("GITHUB_SHA") or env.get("CI_COMMIT_SHA") or _git("rev-parse", "HEAD")
    if sha:
        found["git_sha"] = sha
    branch = (
        env.get("GITHUB_HEAD_REF")
        or env.get("GITHUB_REF_NAME")
        or env.get("CI_COMMIT_REF_NAME")
        or env.get("BUILDKITE_BRANCH")
        or _git("rev-parse", "--abbrev-ref", "HEAD")
    )
    if branch and branch != "HEAD":
        found["branch"] = branch
    status = _git("status", "--porcelain", "--untracked-files=no")
    if status is not None:
        found["dirty"] = bool(status)
    if url := ci_url(env):
        found["ci_url"] = url
    return found


def given_metadata(pairs: tuple[str, ...]) -> dict[str, Any]:
    given: dict[str, Any] = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="--metadata")
        given[name] = value
    return given
