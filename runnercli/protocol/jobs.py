"""What a lease grants: the case job, as the runner receives it, and its lease."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from runnercli.protocol.spec import HarnessSpec


class CaseRef(BaseModel):
    key: str
    input: Any = None


class HarnessRef(BaseModel):
    name: str
    version: int
    digest: str
    author: str = Field(default="", description="Who wrote this version.")
    spec: HarnessSpec


class JudgeInput(BaseModel):
    """What a judge job judges (protocol 3): the case's input, the output it gave, the
    expected answer and the rubric. Only a judge job carries an expected answer."""

    case_key: str
    rubric: str
    input: Any = None
    output: str = ""
    expected: Any = None
    # Which of the grader's votes this job is (0-based), so three judges are three jobs.
    vote: int = 0


class CaseJob(BaseModel):
    """One case to run, as the runner receives it. A case job never carries the expected
    answer; a judge job (`kind: judge`, protocol 3) carries it in `judge`."""

    job_id: int
    attempt_id: int
    lease_epoch: int
    run_id: int
    workspace: str
    submitted_by: str
    repeat: int = 0
    case: CaseRef
    harness: HarnessRef
    capabilities: list[str] = Field(default_factory=list)
    timeout_s: int
    # Protocol 3: a judge job, and the run's commit for a harness whose repo.ref is `run`.
    kind: Literal["case", "judge"] = "case"
    judge: JudgeInput | None = None
    git_sha: str | None = None
    # Protocol 4: the case's hidden files (`{path: content}`), beside the case and never in
    # it: written into the worktree once the agent has ended, before the verifier runs.
    hidden: dict[str, str] | None = Field(default=None, exclude_if=lambda v: v is None)


class Lease(BaseModel):
    job_id: int
    lease_epoch: int
    lease_ttl_ms: int
    heartbeat_ms: int


class LeaseGrant(BaseModel):
    job: CaseJob
    lease: Lease


class LeaseReply(BaseModel):
    """The reply to `lease_job`. `jobs` is present only when the runner asked for several
    (`max_jobs`): then it lists every grant, the first also being `job`/`lease`; without
    `max_jobs` the reply is the single-job one, unchanged."""

    job: CaseJob | None = None
    lease: Lease | None = None
    update_required: bool = False
    jobs: list[LeaseGrant] | None = Field(default=None, exclude_if=lambda jobs: jobs is None)

    def grants(self) -> list[LeaseGrant]:
        if self.jobs is not None:
            return list(self.jobs)
        if self.job is not None and self.lease is not None:
            return [LeaseGrant(job=self.job, lease=self.lease)]
        return []
