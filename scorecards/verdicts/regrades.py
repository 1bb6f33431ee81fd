"""Regrade without rerunning: a finished run's stored outputs scored again on the server, by
its harness's grader or by the grader of another version of the same harness. No case runs
again and the queue is not touched.

Outputs are graded before the transaction, in keyset chunks (a run's outputs are never held
in memory at once); the transaction takes the run's row lock, reads what a person may have
changed meanwhile, and writes the changed verdicts in batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone
from pydantic import ValidationError

from core.errors import Conflict, Invalid, NotFound
from runnercli.protocol import HarnessSpec
from runnercli.protocol.features import JUDGE_FEATURES
from scorecards import scoring
from scorecards.judging.services import judge_spec, judgements_queue
from scorecards.models import CaseResult, HarnessVersion, Run, RunStatus
from scorecards.selectors.summary import run_summary
from scorecards.services.events import event
from scorecards.services.grades import GRADE_STATE, Regrading, grades_write
from scorecards.services.runs import runtime_resolve
from scorecards.verdicts.services import run_for_member, run_restate

if TYPE_CHECKING:
    from django.contrib.auth.models import User

GRADE_CHUNK = 500


@dataclass(frozen=True)
class Regraded:
    """What a regrade did: results scored again, those whose verdict or score changed, and
    those where a person's verdict stands over the grader's new one."""

    run: Run
    grader: HarnessVersion
    regraded: int
    changed: int
    kept: int
    summary: dict[str, Any]


def regrade_by_judges(*, user: User, run: Run, harness: HarnessVersion) -> Regraded:
    """Regrade with a `judge` grader: judge jobs for every completed result's stored output,
    on the submitter's runners (no case runs again). The run is `running` until they are in;
    a person's verdict stands over what they decide."""
    spec = _spec(harness)
    # Judges run where the run's cases ran: on the submitter's runners, never the caller's.
    runtime_resolve(
        user=run.submitted_by,
        runtime=run.runtime,
        capabilities=judge_spec(spec).required_capabilities(),
        features=JUDGE_FEATURES,
    )
    with transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).get(pk=run.pk)
        if not run.is_terminal:
            raise Conflict(f"Run {run.pk} is {run.status}: regrade it once it has ended.")
        results = list(
            CaseResult.objects.filter(run=run, status="completed").select_related("case", "run")
        )
        now = timezone.now()
        # Each stored output waits for its judges (`judging`): its settled verdict goes to its
        # history first, where what they decide joins it.
        regrade = Regrading(harness_id=harness.pk, by=user, at=now)
        grades_write(run, [(result, scoring.JUDGING) for result in results], regrade=regrade)
        for result in results:
            judgements_queue(result=result, spec=spec, place=now)
        run.graded_with = None if harness.pk == run.harness_id else harness
        run.regraded_at = now
        run.status, run.finished_at = RunStatus.RUNNING, None
        Run.objects.filter(pk=run.pk).update(
            graded_with=run.graded_with,
            regraded_at=now,
            status=run.status,
            finished_at=None,
        )
        kept = sum(1 for result in results if result.verdict_by_id is not None)
        votes = len(results) * (spec.grader.votes or 1)
        event(
            run,
            f"Regrade by {user.get_username()} with {harness}: {votes} judge jobs queued for "
            f"{len(results)} stored outputs on {run.submitted_by.get_username()}'s runners"
            + (f"; {kept} person's verdicts kept" if kept else "")
            + ".",
        )
        summary = run_summary(run)
    return Regraded(run, harness, len(results), 0, kept, summary)


def _grader_version(run: Run, harness: str | None, version: int | None) -> HarnessVersion:
    if harness is not None and harness != run.harness.name:
        raise Invalid(
            {
                "harness": [
                    f"Run {run.pk} ran harness {run.harness.name!r}: a regrade applies a version"
                    f" of that harness, not of {harness!r}."
                ]
            }
        )
    if version is None:
        return run.graded_with or run.harness
    found = HarnessVersion.objects.filter(
        workspace_id=run.workspace_id, name=run.harness.name, version=version
    ).first()
    if found is None:
        raise NotFound(f"Harness {run.harness.name!r} has no version {version}.")
    return found


def _spec(harness: HarnessVersion) -> HarnessSpec:
    try:
        return HarnessSpec.model_validate(harness.spec)
    except ValidationError as exc:
        why = exc.errors()[0]["msg"]
        raise Invalid({"harness_version": [f"{harness} cannot grade: {why}"]}) from exc


def grades_of(run: Run, spec: HarnessSpec) -> dict[int, scoring.Grade]:
    """Grade every completed result's stored output (no lock held), by result id. Results
    that never completed (error, timeout, no runner) keep their error: there is nothing to
    grade."""
    grades: dict[int, scoring.Grade] = {}
    after = 0
    while True:
        rows = list(
            CaseResult.objects.filter(run=run, status="completed", pk__gt=after)
            .order_by("pk")
            .values_list(
                "pk", "output", "exit_code", "case__expected", "verify", "tampered", "case__tests"
            )[:GRADE_CHUNK]
        )
        for pk, output, exit_code, expected, verify, tampered, tests in rows:
            grades[pk] = scoring.grade(
                spec=spec,
                status="completed",
                output=output,
                exit_code=exit_code,
                expected=expected,
                verify=verify,
                tampered=tampered,
                tests=tests,
            )
        if len(rows) < GRADE_CHUNK:
            return grades
        after = rows[-1][0]


def run_regrade(
    *, user: User, run_id: int, harness_version: int | None = None, harness: str | None = None
) -> Regraded:
    """Score a finished run's stored outputs again with its harness's grader, or that of
    another version of the same harness; earlier verdicts stay in each case's history."""
    run = run_for_member(user=user, run_id=run_id)
    grader = _grader_version(run, harness, harness_version)
    spec = _spec(grader)
    if not run.is_terminal:
        raise Conflict(f"Run {run.pk} is {run.status}: regrade it once it has ended.")
    if spec.grader.type == "judge":
        return regrade_by_judges(user=user, run=run, harness=grader)
    grades = grades_of(run, spec)
    with transaction.atomic():
        run = Run.objects.select_for_update(of=("self",)).get(pk=run.pk)
        before = run_summary(run)
        completed = CaseResult.objects.filter(run=run, status="completed").only(*GRADE_STATE)
        rows = [row for row in completed if row.pk in grades]
        regrade = Regrading(harness_id=grader.pk, by=user)
        changed = grades_write(run, [(row, grades[row.pk]) for row in rows], regrade=regrade)
        run.graded_with = None if grader.pk == run.harness_id else grader
        run.regraded_at = timezone.now()
        Run.objects.filter(pk=run.pk).update(
            graded_with=run.graded_with, regraded_at=run.regraded_at
        )
        run_restate(run)
        after = run_summary(run)
        kept = sum(1 for row in rows if row.verdict_by_id is not None)
        event(run, _said(user, grader, len(rows), len(changed), kept, before, after))
    return Regraded(run, grader, len(rows), len(changed), kept, after)


def _said(
    user: User,
    grader: HarnessVersion,
    regraded: int,
    changed: int,
    kept: int,
    before: dict[str, Any],
    after: dict[str, Any],
) -> str:
    persons = f"; {kept} person's verdicts kept" if kept else ""
    return (
        f"Regraded by {user.get_username()} with {grader}: {regraded} results scored again, "
        f"{changed} changed{persons} — now {after['pass']} pass, {after['fail']} fail, "
        f"{after['error']} error (was {before['pass']}/{before['fail']}/{before['error']})."
    )
