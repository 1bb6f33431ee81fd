"""The case job: what a runner is sent to run a case or to judge one — the wire contract's
`CaseJob`, built here, once, for the run's lane and the judges' alike.

A dispatch builds its case job typed (`case_job`), every field but the lease's and each job's
own: what its jobs share is stored once, in their batch (`JobPlan.shared`), and each job keeps
its own part (`JobPlan.own`: its case and repeat, and a judge job what it judges). The queue
adds the lease (job, attempt, epoch) when it grants one and hands the runner
`CaseJob(lease, **shared, **own)`: the same model, never a second copy of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from runnercli.protocol import CaseJob, CaseRef, HarnessRef, HarnessSpec, JudgeInput, harness_digest
from scorecards.models import Run

# What the queue fills in when it leases a job, and what each job has of its own.
LEASE_FIELDS = frozenset({"job_id", "attempt_id", "lease_epoch"})
OWN_FIELDS = frozenset({"repeat", "case", "judge", "hidden"})


@dataclass(frozen=True)
class JobPlan:
    """A dispatch's case job, typed (its lease and case left blank), and the runner features
    its jobs need."""

    job: CaseJob
    needs_features: Sequence[str]

    @property
    def shared(self) -> dict[str, Any]:
        """What every job of the dispatch shares: stored once, in their batch."""
        unset = {"git_sha"} if self.job.git_sha is None else set()
        return self.job.model_dump(mode="json", exclude=set(LEASE_FIELDS | OWN_FIELDS) | unset)

    @property
    def capabilities(self) -> list[str]:
        return list(self.job.capabilities)

    def own(
        self,
        key: str,
        case_input: Any,
        repeat: int,
        judge: JudgeInput | None = None,
        hidden: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """One job's own part (the model's `repeat`, `case`, `judge` and the case's hidden
        files, beside the case and never in it), written as plain JSON: a 10,000-case
        dispatch builds it 10,000 times."""
        own: dict[str, Any] = {"repeat": repeat, "case": {"key": key, "input": case_input}}
        if judge is not None:
            own["judge"] = judge.model_dump(mode="json")
        if hidden:
            own["hidden"] = hidden
        return own


def case_job(
    *,
    run: Run,
    spec: HarnessSpec,
    name: str,
    kind: Literal["case", "judge"] = "case",
    needs_features: Sequence[str] = (),
    run_id: int | None = None,
) -> JobPlan:
    """The case job of `run`'s jobs that run `spec` under the harness name `name` (a judge's
    is `NAME.judge`), at the version of the run's harness. `run_id` stands for the run's id
    before the run is inserted, for a statement that writes the id into it."""
    author = run.harness.created_by
    repo = spec.repo
    git_sha = run.metadata["git_sha"] if repo is not None and repo.ref == "run" else None
    job = CaseJob(
        job_id=0,
        attempt_id=0,
        lease_epoch=0,
        run_id=run.pk if run_id is None else run_id,
        workspace=run.workspace.slug,
        submitted_by=run.submitted_by.get_username(),
        case=CaseRef(key=""),
        harness=HarnessRef(
            name=name,
            version=run.harness.version,
            digest=harness_digest(spec),
            author=author.get_username() if author else "",
            spec=spec,
        ),
        capabilities=spec.required_capabilities(),
        timeout_s=spec.timeout_s,
        kind=kind,
        git_sha=git_sha,
    )
    return JobPlan(job=job, needs_features=list(needs_features))
