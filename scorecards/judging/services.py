"""Judge jobs: queued when a judge-graded case completes, their answers recorded, and the
case's verdict decided once every vote is in.

Each function runs inside its caller's transaction, with the run's row locked (the lock
order everywhere: the run, then its jobs), so two judge answers of one case never decide it
twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from runnercli.protocol import CaseResult as WireResult
from runnercli.protocol import HarnessSpec, JudgeInput
from runnercli.protocol.features import JUDGE_FEATURES
from runners import queue
from runners.models import Runner, RunnerJob
from scorecards.judging.answers import Answer, Unreadable, majority, model_named, prompt_digest
from scorecards.judging.models import Judgement, JudgementState
from scorecards.models import TEXT_CHARS, CaseResult, EventLevel, Run
from scorecards.scoring import JUDGING, Grade
from scorecards.services.events import event
from scorecards.services.grades import Regrading, grades_write
from scorecards.services.jobs import case_job
from scorecards.services.results import next_result_seq

# An unreadable answer is asked again once; the second decides.
MAX_TRIES = 2
_RAW_TAIL_CHARS = 2000
_NAME_CHARS = 100


def judge_spec(spec: HarnessSpec) -> HarnessSpec:
    """The judge of a judge-graded harness as a harness of its own: what consent shows and
    pins, and what the runner executes. Its environment is empty: no key of the workspace
    reaches the judge."""
    judge = spec.grader.judge
    assert judge is not None
    return HarnessSpec(
        command=judge.command,
        timeout_s=judge.timeout_s,
        capabilities=judge.capabilities,
        output="text",
        # A judge that is an agent CLI runs with its harness's agent configuration.
        agent_config=spec.agent_config,
    )


def judge_name(harness_name: str) -> str:
    """The name a harness's judge is allowed under (`NAME.judge`), beside the harness's own."""
    return f"{harness_name[: _NAME_CHARS - 6]}.judge"


def _judged(result: CaseResult, rubric: str, vote: int) -> JudgeInput:
    """What one vote's judge is given: the case's input and expected answer, the output."""
    case = result.case
    return JudgeInput(
        case_key=case.key,
        rubric=rubric,
        input=case.input,
        output=result.output,
        expected=case.expected,
        vote=vote,
    )


def _queue_jobs(
    run: Run, result: CaseResult, spec: HarnessSpec, votes: Sequence[int], place: datetime
) -> list[RunnerJob]:
    rubric = spec.grader.rubric
    assert spec.grader.judge is not None and rubric is not None
    plan = case_job(
        run=run,
        spec=judge_spec(spec),
        name=judge_name(run.harness.name),
        kind="judge",
        needs_features=JUDGE_FEATURES,
    )
    case = result.case
    return queue.judge_jobs_queue(
        owner_id=run.submitted_by_id,
        runner_id=run.runner_id,
        run_id=run.pk,
        shared=plan.shared,
        payloads=[
            (case.key, result.repeat, plan.own(case.key, case.input, result.repeat, judge))
            for judge in (_judged(result, rubric, vote) for vote in votes)
        ],
        required_capabilities=plan.capabilities,
        needs_features=plan.needs_features,
        place=place,
        max_attempts=settings.EVERDICT_MAX_ATTEMPTS,
    )


def judgements_queue(
    *, result: CaseResult, spec: HarnessSpec | None = None, place: datetime | None = None
) -> list[Judgement]:
    """Queue the judge jobs of one stored output (`votes` of them) and mark its grade
    `judging` (by the rule: under a person's verdict, what the grader says); earlier votes on
    it are replaced. `spec` is the harness whose judge grader applies (the run's own by
    default); `place` is where the judge jobs stand in the queue (their case job's creation,
    by default now). The caller holds the run's row lock."""
    run = result.run
    spec = spec or HarnessSpec.model_validate(run.harness.spec)
    votes = range(spec.grader.votes or 1)
    jobs = _queue_jobs(run, result, spec, votes, place or timezone.now())
    Judgement.objects.filter(result=result).delete()
    dumped = spec.model_dump(mode="json")
    judgements = Judgement.objects.bulk_create(
        Judgement(result=result, vote=vote, job=job, spec=dumped)
        for vote, job in zip(votes, jobs, strict=True)
    )
    grades_write(run, [(result, JUDGING)])
    return judgements


def judged_by(runner: Runner, spec: HarnessSpec, result: WireResult) -> dict[str, Any]:
    """Who judged, with what: the runner, its owner, the tool versions it probed, the model
    named in the judge's argv and the digest of the judge's prompt."""
    judge = spec.grader.judge
    command = judge.command if judge else []
    return {
        "runner": f"{runner.pk}/{runner.label}",
        "user": runner.owner.get_username(),
        "tools": dict(result.fingerprint.tools),
        "model": model_named(command),
        "prompt_digest": prompt_digest(command, spec.grader.rubric or ""),
    }


def judgement_record(
    *,
    run: Run,
    job: RunnerJob,
    runner: Runner,
    result: WireResult,
    answer: Answer | Unreadable,
    usage: dict[str, Any] | None,
) -> None:
    """Record a judge job's answer; retry an unreadable one once; decide the case when its
    last vote is in."""
    judgement = Judgement.objects.select_related("result__case").filter(job=job).first()
    if judgement is None:
        return
    spec = HarnessSpec.model_validate(judgement.spec or run.harness.spec)
    judgement.raw_tail = result.output[-_RAW_TAIL_CHARS:].replace("\x00", "\ufffd")
    judgement.judged_by = judged_by(runner, spec, result)
    judgement.usage = usage
    if isinstance(answer, Answer):
        judgement.state = JudgementState.READABLE
        judgement.passed, judgement.score = answer.passed, answer.score
        judgement.reason = answer.reason
    elif judgement.tries < MAX_TRIES:
        [retry] = _queue_jobs(run, judgement.result, spec, [judgement.vote], job.created_at)
        judgement.job, judgement.tries = retry, judgement.tries + 1
        judgement.save()
        event(
            run,
            f"Case {job.case_key}: judge's answer unreadable ({answer}) — asked again.",
            EventLevel.WARNING,
        )
        return
    else:
        judgement.state = JudgementState.UNREADABLE
        judgement.reason = f"judge's answer unreadable: {answer}"[:TEXT_CHARS]
    judgement.settled_at = timezone.now()
    judgement.save()
    _decide(run, judgement.result)


def judgement_fail(*, run: Run, job: RunnerJob, reason: str) -> None:
    """A judge job ended without an answer: its vote counts as none."""
    judgement = Judgement.objects.select_related("result").filter(job=job).first()
    if judgement is None or judgement.state != JudgementState.DUE:
        return
    judgement.state = JudgementState.FAILED
    judgement.reason = f"judge failed: {reason}"[:TEXT_CHARS]
    judgement.settled_at = timezone.now()
    judgement.save()
    _decide(run, judgement.result)


def _decide(run: Run, result: CaseResult) -> None:
    """Once no vote is due, the case's verdict: the majority of the readable answers,
    written by the rule (under a person's verdict, it is what the grader says)."""
    votes = list(Judgement.objects.filter(result=result).order_by("vote"))
    if any(v.state == JudgementState.DUE for v in votes):
        return
    answers = [
        Answer(bool(v.passed), v.score or 0.0, v.reason)
        if v.state == JudgementState.READABLE
        else None
        for v in votes
    ]
    decision = majority(answers, why_not=[v.reason for v in votes if answers[v.vote] is None])
    first = next((v for v in votes if v.state == JudgementState.READABLE), votes[0])
    result.judged_by = {
        **first.judged_by,
        "agreement": decision.agreement,
        "votes": [
            {
                "vote": v.vote,
                "state": v.state,
                "pass": v.passed,
                "score": v.score,
                "reason": v.reason,
                "runner": v.judged_by.get("runner", ""),
            }
            for v in votes
        ],
    }
    # The verdict settles now: a new settlement number, so the run page's live feed and a
    # results cursor see the case again, decided.
    result.seq = next_result_seq(run)
    result.save(update_fields=["judged_by", "seq"])
    # A result with a history (a regrade wrote its earlier verdict there first) is joined by
    # what its judges decided; a first judgement costs nothing.
    joins = Regrading(harness_id=run.graded_with_id or run.harness_id, joins_only=True)
    grade = Grade(verdict=decision.verdict, score=decision.score, detail=decision.reason)
    grades_write(run, [(result, grade)], regrade=joins)
