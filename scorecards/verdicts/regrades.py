"""Regrade without rerunning: a finished run's stored outputs scored again on the server, by
its harness's grader or by the grader of another version of the same harness. No case runs
again and the queue is not touched.

Outputs are graded before the transaction, in keyset chunks (a run's outputs are never held
in memory at once); the transaction takes the run's row lock, reads what a person may have
changed meanwhile, and writes the changed verdicts in batches.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import connection, transaction
from django.utils import timezone
from pydantic import ValidationError

from core.errors import Conflict, Invalid, NotFound
from runnercli.protocol import HarnessSpec
from runnercli.protocol.features import JUDGE_FEATURES
from scorecards import scoring
from scorecards.judging.services import judge_spec, judgements_queue
from scorecards.models import (
    CaseResult,
    HarnessVersion,
    Run,
    RunStatus,
    VerdictEntry,
    VerdictSource,
)
from scorecards.selectors.summary import run_summary
from scorecards.services.events import event
from scorecards.services.runs import runtime_resolve
from scorecards.verdicts.services import originals_record, run_for_member, run_restate

if TYPE_CHECKING:
    from django.contrib.auth.models import User

GRADE_CHUNK = 500
_WRITTEN = ["verdict", "score", "grader_verdict", "grader_score", "reason", "error"]
WRITE_BATCH = 500
_STATE = (
    "pk",
    "verdict",
    "score",
    "reason",
    "error",
    "verdict_by_id",
    "grader_verdict",
    "grader_score",
    "created_at",
)


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
        had = set(VerdictEntry.objects.filter(result__run=run).values_list("result_id", flat=True))
        originals_record(run, results, had=had)
        now = timezone.now()
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
            .values_list("pk", "output", "exit_code", "case__expected")[:GRADE_CHUNK]
        )
        for pk, output, exit_code, expected in rows:
            grades[pk] = scoring.grade(
                spec=spec, status="completed", output=output, exit_code=exit_code, expected=expected
            )
        if len(rows) < GRADE_CHUNK:
            return grades
        after = rows[-1][0]


def _apply(row: CaseResult, grade: scoring.Grade) -> tuple[bool, bool]:
    """Put the new grade on the row (under a person's verdict, underneath it): whether
    anything changed, and whether the grader's verdict or score did."""
    score = min(1.0, max(0.0, grade.score))
    error = grade.detail[:1000] if grade.verdict == "error" else ""
    if row.verdict_by_id is None:
        judged = (row.verdict, row.score) != (grade.verdict, score)
        row.verdict, row.score = grade.verdict, score
    else:
        judged = (row.grader_verdict, row.grader_score) != (grade.verdict, score)
        row.grader_verdict, row.grader_score = grade.verdict, score
    said = (row.reason, row.error) != (grade.detail[:1000], error)
    row.reason, row.error = grade.detail[:1000], error
    return judged or said, judged


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
        completed = CaseResult.objects.filter(run=run, status="completed").only(*_STATE)
        rows = [row for row in completed if row.pk in grades]
        saved = {row.pk: copy.copy(row) for row in rows}
        applied = {row.pk: _apply(row, grades[row.pk]) for row in rows}
        written = [row for row in rows if applied[row.pk][0]]
        changed = [row for row in rows if applied[row.pk][1]]
        _write(written)
        _record(run, changed, [saved[row.pk] for row in changed], grader, user)
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


def _write(rows: list[CaseResult]) -> None:
    """Update the rows' grades: one parametrized UPDATE run for every row (a C loop on
    SQLite, a pipeline on psycopg). Django's bulk_update builds a CASE per field and row,
    which cost ten times the grading itself."""
    meta, quote = CaseResult._meta, connection.ops.quote_name
    column = {field.name: str(field.column) for field in meta.concrete_fields}
    sets = ", ".join(f"{quote(column[name])} = %s" for name in _WRITTEN)
    sql = f"UPDATE {quote(meta.db_table)} SET {sets} WHERE {quote(column['id'])} = %s"
    with connection.cursor() as cursor:
        cursor.executemany(sql, [[getattr(r, name) for name in _WRITTEN] + [r.pk] for r in rows])


def _record(
    run: Run,
    changed: list[CaseResult],
    saved: list[CaseResult],
    grader: HarnessVersion,
    user: User,
) -> None:
    """Write the history of the results whose verdict changed: the settled verdict first
    where a result had none, then the new grade (not counted under a person's verdict)."""
    ids = [row.pk for row in changed]
    had: set[int] = set()
    for start in range(0, len(ids), WRITE_BATCH):
        batch = ids[start : start + WRITE_BATCH]
        entries = VerdictEntry.objects.filter(result_id__in=batch)
        had |= set(entries.values_list("result_id", flat=True))
    originals_record(run, saved, had=had)
    now = timezone.now()
    VerdictEntry.objects.bulk_create(
        [
            VerdictEntry(
                result_id=row.pk,
                verdict=row.grader_verdict if row.verdict_by_id else row.verdict,
                score=(row.grader_score or 0.0) if row.verdict_by_id else row.score,
                reason=row.reason,
                source=VerdictSource.REGRADE,
                harness=grader,
                by=user,
                counted=row.verdict_by_id is None,
                at=now,
            )
            for row in changed
        ],
        batch_size=WRITE_BATCH,
    )


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
