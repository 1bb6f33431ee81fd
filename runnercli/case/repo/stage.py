"""The `Repo` stage: the case runs in its own worktree of the member's checkout.

For a harness with `repo: {name, ref}`, `start` makes a detached worktree of the checkout
mapped to `name` (`python -m runnercli repo add`) inside the case's directory, at `head`,
`working` (HEAD plus the member's uncommitted tracked changes) or `run` (the run's commit,
`job.git_sha`) — `worktree` says how, without writing to the member's
checkout, index or stash list. The harness runs there: its working directory,
`$EVERDICT_REPO_DIR` and `{repo.path}`; the result's fingerprint says which state of the repo
it ran on. A repo not mapped here, or a commit the local clone lacks, ends the case `Failed`
with what fixes it.

`finish` keeps what the case changed as `repo.diff` (binary-safe, bounded by the server's
`max_artifact_bytes`), an artifact of the case, written beside the worktree. `cleanup` removes
the worktree and its registration however the case ended (killed, timed out, canceled, the
runner stopped); what a runner killed with `kill -9` left is removed at the next `run`
(`Worktrees.remove_leftovers`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from runnercli.case.pipeline import Artifact, CaseContext, CaseEnded, Failed, Given, Stage
from runnercli.case.repo import (
    DIFF_ARTIFACT_PATH,
    DIFF_MEDIA_TYPE,
    MappingError,
    RepoError,
    Worktree,
    Worktrees,
    repo_diff,
    repo_path,
)
from runnercli.case.repo.git import GitError
from runnercli.protocol import RepoFingerprint

REPO_DIR_ENV = "EVERDICT_REPO_DIR"
REPO_PATH_PLACEHOLDER = "repo.path"


class Repo(Stage):
    name = "repo"
    needs = frozenset({Given.DIRECTORY})

    def __init__(
        self,
        worktrees: Worktrees,
        repos: Mapping[str, str],
        *,
        max_diff_bytes: Callable[[], int],
    ) -> None:
        self.worktrees = worktrees
        self.repos = repos
        # Read when the case is over: the server's limit (`hello.limits`) as it stands then.
        self.max_diff_bytes = max_diff_bytes
        self.worktree: Worktree | None = None

    async def start(self, case: CaseContext) -> None:
        spec = case.job.harness.spec.repo
        if spec is None:
            return  # a harness without a repo runs in the case's own directory
        summary = f"repo {spec.name}"
        try:
            checkout = repo_path({"repos": dict(self.repos)}, spec.name)
            self.worktree = await self.worktrees.add(
                name=spec.name,
                checkout=checkout,
                case_dir=case.directory,
                ref=spec.ref,
                sha=case.job.git_sha,
            )
        except (MappingError, RepoError, GitError) as exc:
            raise CaseEnded(Failed(str(exc), summary=summary)) from exc
        path = str(self.worktree.path)
        case.workdir = self.worktree.path
        case.env[REPO_DIR_ENV] = path
        case.placeholders[REPO_PATH_PLACEHOLDER] = path
        case.fingerprint["repo"] = RepoFingerprint(**self.worktree.state.fingerprint())
        case.note(_started_line(self.worktree))

    async def finish(self, case: CaseContext) -> None:
        worktree, outcome = self.worktree, case.outcome
        # A case killed is not reported: what it changed is not wanted.
        if worktree is None or outcome is None or outcome.status == "canceled":
            return
        try:
            diff = await repo_diff(worktree, self.max_diff_bytes())
        except GitError as exc:
            case.note(f"⚠ {DIFF_ARTIFACT_PATH} could not be made: {exc}")
            return
        source = worktree.case_dir / DIFF_ARTIFACT_PATH
        await asyncio.to_thread(source.write_bytes, diff)
        case.artifacts.append(Artifact(DIFF_ARTIFACT_PATH, source, DIFF_MEDIA_TYPE))

    async def cleanup(self, case: CaseContext) -> None:
        if self.worktree is not None:
            worktree, self.worktree = self.worktree, None
            # Shielded: a cancel arriving meanwhile must not leave it half removed.
            await asyncio.shield(self.worktrees.remove(worktree))


def _started_line(worktree: Worktree) -> str:
    state = worktree.state
    what = {
        "head": "HEAD",
        "working": "HEAD plus the uncommitted changes" if state.dirty else "HEAD (no changes)",
        "run": "the run's commit",
    }.get(state.base, state.base)
    return f"repo {state.name}: its own worktree at {what} ({state.sha[:12]})"
