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
from django.db.models import Max
from django.utils import timezone

from runnercli.protocol import CaseResult as WireResult
from runnercli.protocol import HarnessSpec, JudgeInput, harness_digest
from runnercli.protocol.features import JUDGE_FEATURES
from runners import queue
from runners.models import Runner, RunnerJob
from scorecards.judging.answers import Answer, Unreadable, majority, model_named, prompt_digest
from scorecards.judging.models import Judgement, JudgementState
from scorecards.models import (
    CaseResult,
    EventLevel,
    Run,
    Verdict,
    VerdictEntry,
    VerdictSource,
)
from scorecards.services.events import event

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
    )


def judge_name(harness_name: str) -> str:
    """The name a harness's judge is allowed under (`NAME.judge`), beside the harness's own."""
    return f"{harness_name[: _NAME_CHARS - 6]}.judge"


def _shared(run: Run, spec: HarnessSpec) -> dict[str, Any]:
    judging = judge_spec(spec)
    author = run.harness.created_by
    return {
        "run_id": run.pk,
        "workspace": run.workspace.slug,
        "submitted_by": run.submitted_by.get_username(),
        "harness": {
            "name": judge_name(run.harness.name),
            "version": run.harness.version,
            "digest": harness_digest(judging),
            "author": author.get_username() if author else "",
            "spec": judging.model_dump(mode="json"),
        },
        "capabilities": judging.required_capabilities(),
        "timeout_s": judging.timeout_s,
        "kind": "judge",
    }


def _payload(result: CaseResult, rubric: str, vote: int) -> dict[str, Any]:
    case = result.case
    judge = JudgeInput(
        case_key=case.key,
        rubric=rubric,
        input=case.input,
        output=result.output,
        expected=case.expected,
        vote=vote,
    )
    return {
        "repeat": result.repeat,
        "case": {"key": case.key, "input": case.input},
        "judge": judge.model_dump(mode="json"),
    }


def _queue_jobs(
    run: Run, result: CaseResult, spec: HarnessSpec, votes: Sequence[int], place: datetime
) -> list[RunnerJob]:
    assert spec.grader.judge is not None and spec.grader.rubric is not None
    return queue.judge_jobs_queue(
        owner_id=run.submitted_by_id,
        runner_id=run.runner_id,
        run_id=run.pk,
        shared=_shared(run, spec),
        payloads=[
            (result.case.key, result.repeat, _payload(result, spec.grader.rubric, vote))
            for vote in votes
        ],
        required_capabilities=judge_spec(spec).required_capabilities(),
        needs_features=list(JUDGE_FEATURES),
        place=place,
        max_attempts=settings.EVERDICT_MAX_ATTEMPTS,
    )


def judgements_queue(
    *, result: CaseResult, spec: HarnessSpec | None = None, place: datetime | None = None
) -> list[Judgement]:
    """Queue the judge jobs of one stored output (`votes` of them) and mark its verdict
    `judging`; earlier votes on it are replaced. `spec` is the harness whose judge grader
    applies (the run's own by default); `place` is where the judge jobs stand in the queue
    (their case job's creation, by default now). The caller holds the run's row lock."""
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
    if result.verdict_by_id is None:
        CaseResult.objects.filter(pk=result.pk).update(verdict=Verdict.JUDGING, score=0.0)
        result.verdict = Verdict.JUDGING
    else:
        # A person's verdict stands: the judges decide what the grader says underneath it.
        CaseResult.objects.filter(pk=result.pk).update(grader_verdict=Verdict.JUDGING)
        result.grader_verdict = Verdict.JUDGING
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
        judgement.reason = f"judge's answer unreadable: {answer}"[:1000]
    judgement.settled_at = timezone.now()
    judgement.save()
    _decide(judgement.result)


def judgement_fail(*, job: RunnerJob, reason: str) -> None:
    """A judge job ended without an answer: its vote counts as none."""
    judgement = Judgement.objects.select_related("result").filter(job=job).first()
    if judgement is None or judgement.state != JudgementState.DUE:
        return
    judgement.state = JudgementState.FAILED
    judgement.reason = f"judge failed: {reason}"[:1000]
    judgement.settled_at = timezone.now()
    judgement.save()
    _decide(judgement.result)


def _decide(result: CaseResult) -> None:
    """Once no vote is due, the case's verdict: the majority of the readable answers."""
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
    person = result.verdict_by_id is not None
    if person:
        result.grader_verdict, result.grader_score = decision.verdict, decision.score
    else:
        result.verdict, result.score = decision.verdict, decision.score
    result.reason = decision.reason[:1000]
    result.error = decision.reason[:1000] if decision.verdict == Verdict.ERROR else ""
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
    last = CaseResult.objects.filter(run_id=result.run_id).aggregate(last=Max("seq"))["last"]
    result.seq = (last or 0) + 1
    result.save(
        update_fields=[
            "verdict",
            "score",
            "grader_verdict",
            "grader_score",
            "reason",
            "error",
            "judged_by",
            "seq",
        ]
    )
    _history_record(result, decision.verdict, decision.score, counted=not person)


def _history_record(result: CaseResult, verdict: str, score: float, *, counted: bool) -> None:
    """A judged verdict of a result that has a history (a regrade wrote its earlier verdict
    there first) joins it; a first judgement costs nothing."""
    if not VerdictEntry.objects.filter(result=result).exists():
        return
    run = result.run
    VerdictEntry.objects.create(
        result=result,
        verdict=verdict,
        score=score,
        reason=result.reason,
        source=VerdictSource.REGRADE,
        harness_id=run.graded_with_id or run.harness_id,
        counted=counted,
    )
