"""How judges join a run's lifecycle (the registries of `scorecards.lifecycle`): a judge-graded
run needs a runner that can judge; a judge job's answer is read before the settle lock and
recorded under it; a judge-graded case that completed queues its judges; what the judges
reported spending is a figure of the run's summary."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db.models import FloatField, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from runnercli.protocol import CaseResult as WireResult
from runnercli.protocol import HarnessSpec
from runnercli.protocol.features import JUDGE_FEATURES
from runners.models import JobKind, Runner, RunnerJob
from scorecards import scoring
from scorecards.judging.answers import Answer, Unreadable, answer_read
from scorecards.judging.models import Judgement
from scorecards.judging.services import (
    judge_spec,
    judgement_fail,
    judgement_record,
    judgements_queue,
)
from scorecards.lifecycle import Stored, lane, results_stored, start_check, summary_part
from scorecards.models import Run, Verdict
from scorecards.services.grading import storable
from scorecards.services.runs import runtime_resolve

if TYPE_CHECKING:
    from django.contrib.auth.models import User

_JUDGE_ENDINGS = {"timeout": "the judge timed out", "error": "the judge could not run"}


@dataclass(frozen=True)
class Judged:
    """A judge job's reported answer, read: what the settle transaction records."""

    answer: Answer | Unreadable
    usage: dict[str, Any] | None


def judged_one(result: WireResult) -> Judged:
    """Read a judge's answer strictly; an ending other than completed is unreadable too."""
    output = storable(result.output)
    answer: Answer | Unreadable
    if result.status != "completed":
        answer = Unreadable(_JUDGE_ENDINGS.get(result.status, f"the judge ended {result.status}"))
    else:
        try:
            answer = answer_read(output)
        except Unreadable as exc:
            answer = exc
    return Judged(answer=answer, usage=scoring.extract_usage(output, "json", result.usage))


@start_check
def judges_can_run(*, user: User, runtime: str, spec: HarnessSpec) -> None:
    """A judge-graded run's judges run on the same runners: one must be able to run them."""
    if spec.grader.type == "judge":
        runtime_resolve(
            user=user,
            runtime=runtime,
            capabilities=judge_spec(spec).required_capabilities(),
            features=JUDGE_FEATURES,
        )


@lane(JobKind.JUDGE)
class JudgeLane:
    """Judge jobs: their report is a judge's answer, not a case's result."""

    def read(self, result: WireResult) -> Judged:
        return judged_one(result)

    def record(
        self, *, run: Run, job: RunnerJob, runner: Runner, result: WireResult, read: Judged
    ) -> None:
        judgement_record(
            run=run, job=job, runner=runner, result=result, answer=read.answer, usage=read.usage
        )

    def lost(self, *, run: Run, job: RunnerJob, reason: str) -> None:
        judgement_fail(run=run, job=job, reason=reason)


@results_stored
def judges_queue(*, run: Run, stored: Sequence[Stored]) -> None:
    """A judge-graded case that completed waits for its judges: their jobs take its place."""
    for kept in stored:
        if kept.row.verdict == Verdict.JUDGING:
            judgements_queue(result=kept.row, place=kept.job.created_at)


@summary_part(judge_cost_usd=0.0)
def judge_cost(run: Run) -> dict[str, float]:
    """What the run's judges reported spending (provenance: the member's login paid it)."""
    cost = Judgement.objects.filter(result__run=run).aggregate(
        cost=Sum(Cast(KT("usage__total_cost_usd"), FloatField()))
    )["cost"]
    return {"judge_cost_usd": round(cost or 0.0, 6)}
