"""The `Verify` stage: did the agent's change work, on paths it could not tamper with?

Listed after the `Repo` stage, it marks the harness's environment (`EVERDICT_CASE_MARK`) as
the case starts; its `Reap` part, right after `Execute`, kills whatever the agent left
running (`reaper`) before anything reads the worktree. In `finish` — after the repo stage has
kept `repo.diff`, before the result is collected and its artifacts gathered — unless the case
was canceled: the protected paths are compared with the start commit and restored
(`tampered`), the case's hidden files written, the verifier run in the worktree with the
case's services still up, and the hidden files taken away again. With a verifier, an agent
that timed out is reported `completed` with `stopped: {by: timeout}`, and the verifier
decides.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import time

from runnercli.case.argv import case_env
from runnercli.case.pipeline import CaseContext, CaseEnded, Failed, Given, Stage
from runnercli.case.repo.git import GitError
from runnercli.case.repo.stage import Repo
from runnercli.case.verify.hidden import HiddenFiles
from runnercli.case.verify.protect import Snapshot, check_and_restore, snapshot_index
from runnercli.case.verify.reaper import (
    MARK_ENV,
    become_subreaper,
    reap_case,
    reap_stale_zombies,
)
from runnercli.case.verify.verifier import run_verifier
from runnercli.protocol.verifying import MAX_TAMPERED_PATHS, Stopped, TamperedPath


class Reap(Stage):
    """Right after the agent: every process it left is killed."""

    name = "reap"
    needs = frozenset({Given.OUTCOME})

    def __init__(self, verify: Verify) -> None:
        self.verify = verify

    async def start(self, case: CaseContext) -> None:
        killed = await asyncio.to_thread(reap_case, self.verify.mark, case.agent_pid)
        await asyncio.to_thread(reap_stale_zombies)
        if killed:
            case.note(f"killed {killed} process(es) the agent left running")


class Verify(Stage):
    name = "verify"
    needs = frozenset({Given.DIRECTORY})

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self.mark = secrets.token_hex(12)
        self.hidden: HiddenFiles | None = None
        self.index: Snapshot | None = None

    def reap(self) -> Reap:
        return Reap(self)

    async def start(self, case: CaseContext) -> None:
        become_subreaper()
        case.env[MARK_ENV] = self.mark
        worktree = self.repo.worktree
        if worktree is not None and case.job.harness.spec.protect is not None:
            self.index = await asyncio.to_thread(snapshot_index, worktree.path)

    async def finish(self, case: CaseContext) -> None:
        outcome, worktree = case.outcome, self.repo.worktree
        if outcome is None or outcome.status == "canceled" or worktree is None:
            return
        spec = case.job.harness.spec
        if spec.protect is not None:
            try:
                changes = await asyncio.to_thread(
                    check_and_restore, worktree.path, worktree.start, spec.protect, self.index
                )
            except (GitError, OSError) as exc:
                raise CaseEnded(Failed(f"the protected paths could not be checked: {exc}")) from exc
            case.adds["tampered"] = [
                TamperedPath(path=c.path, change=c.change)  # type: ignore[arg-type]
                for c in changes[:MAX_TAMPERED_PATHS]
            ]
            if changes:
                shown = ", ".join(f"{c.path} ({c.change})" for c in changes[:5])
                case.note(f"⚠ the agent changed protected paths: {shown}; restored")
        if spec.verify is None:
            return
        if outcome.status == "timeout":
            case.adds["stopped"] = Stopped(by="timeout", limits={"timeout_s": spec.timeout_s})
            case.outcome = dataclasses.replace(outcome, status="completed")
        started = time.monotonic()
        self.hidden = HiddenFiles(worktree.path, case.job.hidden or {})
        try:
            await asyncio.to_thread(self.hidden.write)
            env = case_env(case.job, {**case.env, **spec.verify.env})
            verified = await run_verifier(spec.verify, env, worktree.path, case.kill)
            await asyncio.to_thread(reap_case, self.mark, verified.pid)
        finally:
            await asyncio.to_thread(self.hidden.remove)
            self.hidden = None
        case.verify_s = time.monotonic() - started
        case.adds["verify"] = verified.report
        said = verified.report.error or f"exit code {verified.report.exit_code}"
        case.note(f"verifier: {said} ({case.verify_s:.1f} s)")

    async def cleanup(self, case: CaseContext) -> None:
        if self.hidden is not None:
            await asyncio.to_thread(self.hidden.remove)
