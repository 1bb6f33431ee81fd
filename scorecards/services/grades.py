"""A result's verdict, by one rule, and its history, by one writer.

The rule: a person's verdict stands. What a grader says of a result — as it settles, in a
regrade, from its judges, at a cancel while they were due — is written under a person's
verdict (`grader_verdict`, `grader_score`) while one is set, and is the verdict otherwise.

- `graded`: the rule (pure); `settled_fields`: a result's fields as it settles;
- `grades_write`: a set of results written by the rule, with a regrade's history;
- `person_verdict_set`, `person_verdict_withdraw`: a person's verdict over the grader's, and
  taken back.

Every `VerdictEntry` is written here: a result's settled verdict the first time its verdict
changes (unchanged results cost nothing), then each verdict after it.

Callers hold the run's row lock: two writers of one run's verdicts never interleave.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connection
from django.utils import timezone

from scorecards.models import TEXT_CHARS, CaseResult, Run, Verdict, VerdictEntry, VerdictSource
from scorecards.scoring import Grade

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# What a result says of its grade, in the order the rule gives it.
GRADE_FIELDS = ("verdict", "score", "grader_verdict", "grader_score", "reason", "error")
# What the writer reads of each result: its grade, whether a person's verdict stands, and
# when it settled (its first history entry's time).
GRADE_STATE = ("pk", *GRADE_FIELDS, "verdict_by_id", "created_at")
# What a person's verdict sets, and takes back when withdrawn.
PERSON_FIELDS = [
    "verdict",
    "score",
    "verdict_by",
    "verdict_at",
    "verdict_note",
    "grader_verdict",
    "grader_score",
]
WRITE_BATCH = 500

Fields = tuple[str, float, str, float | None, str, str]


@dataclass(frozen=True)
class Regrading:
    """A regrade's grades join each changed result's history: whose grader said them (a
    harness version), who asked (none for judges), when. With `joins_only`, only results
    that have a history already join it (a first judgement costs nothing)."""

    harness_id: int
    by: User | None = None
    at: datetime = field(default_factory=timezone.now)
    joins_only: bool = False


def _fields(row: CaseResult) -> Fields:
    return (row.verdict, row.score, row.grader_verdict, row.grader_score, row.reason, row.error)


def graded(grade: Grade, *, person: tuple[str, float] | None = None) -> Fields:
    """The verdict rule: a result's fields once `grade` is written on it. A person's verdict
    (`person`: theirs and its score) stands, the grade written under it; otherwise the grade
    is the verdict. The grade's reason is the result's, and its error when it is one."""
    score = min(1.0, max(0.0, grade.score))
    reason = grade.detail[:TEXT_CHARS]
    error = reason if grade.verdict == Verdict.ERROR else ""
    if person is not None:
        return person[0], person[1], grade.verdict, score, reason, error
    return grade.verdict, score, "", None, reason, error


def settled_fields(grade: Grade) -> dict[str, Any]:
    """The fields of a result that settles with `grade` (nobody's verdict over it yet)."""
    return dict(zip(GRADE_FIELDS, graded(grade), strict=True))


def _grader_side(row: CaseResult) -> tuple[str, float | None]:
    """What the grader says of the result (under a person's verdict, or as its verdict)."""
    if row.verdict_by_id is None:
        return row.verdict, row.score
    return row.grader_verdict, row.grader_score


def grades_write(
    run: Run, grades: Iterable[tuple[CaseResult, Grade]], *, regrade: Regrading | None = None
) -> list[CaseResult]:
    """Write each result's grade by the rule: the rows it changes, in one parametrized UPDATE
    for them all. Return the results whose grader's verdict or score changed (updated in
    place); with `regrade`, each joins its history (not counted under a person's verdict)."""
    written: list[CaseResult] = []
    changed: list[tuple[CaseResult, Fields]] = []
    for row, grade in grades:
        before, side = _fields(row), _grader_side(row)
        after = graded(grade, person=(row.verdict, row.score) if row.verdict_by_id else None)
        if after == before:
            continue
        row.verdict, row.score, row.grader_verdict, row.grader_score = after[:4]
        row.reason, row.error = after[4:]
        written.append(row)
        if _grader_side(row) != side:
            changed.append((row, before))
    _update(written)
    if regrade is not None:
        _history_join(run, changed, regrade)
    return [row for row, _ in changed]


def _update(rows: Sequence[CaseResult]) -> None:
    """One parametrized UPDATE run for every row (a C loop on SQLite, a pipeline on psycopg):
    Django's bulk_update builds a CASE per field and row, which cost ten times the grading."""
    if not rows:
        return
    meta, quote = CaseResult._meta, connection.ops.quote_name
    column = {f.name: str(f.column) for f in meta.concrete_fields}
    sets = ", ".join(f"{quote(column[name])} = %s" for name in GRADE_FIELDS)
    sql = f"UPDATE {quote(meta.db_table)} SET {sets} WHERE {quote(column['id'])} = %s"
    with connection.cursor() as cursor:
        cursor.executemany(sql, [[*_fields(row), row.pk] for row in rows])


def _with_history(ids: Sequence[int]) -> set[int]:
    had: set[int] = set()
    for start in range(0, len(ids), WRITE_BATCH):
        batch = ids[start : start + WRITE_BATCH]
        entries = VerdictEntry.objects.filter(result_id__in=batch)
        had |= set(entries.values_list("result_id", flat=True))
    return had


def _history_join(
    run: Run, changed: Sequence[tuple[CaseResult, Fields]], regrade: Regrading
) -> None:
    """The settled verdict first where a result has no history, then the new one (a
    `judging` grade is no verdict: it has none)."""
    had = _with_history([row.pk for row, _ in changed])
    if regrade.joins_only:
        changed = [(row, before) for row, before in changed if row.pk in had]
    _originals(run, [(row, before) for row, before in changed if row.pk not in had])
    entries = []
    for row, _ in changed:
        verdict, score = _grader_side(row)
        if verdict == Verdict.JUDGING:
            continue
        entries.append(
            VerdictEntry(
                result_id=row.pk,
                verdict=verdict,
                score=score or 0.0,
                reason=row.reason,
                source=VerdictSource.REGRADE,
                harness_id=regrade.harness_id,
                by=regrade.by,
                counted=row.verdict_by_id is None,
                at=regrade.at,
            )
        )
    VerdictEntry.objects.bulk_create(entries, batch_size=WRITE_BATCH)


def _originals(run: Run, rows: Sequence[tuple[CaseResult, Fields]]) -> None:
    """Each result's verdict as it settled (its fields before the change), its history's
    first entry."""
    entries = []
    for row, (verdict, score, grader_verdict, grader_score, reason, error) in rows:
        entries.append(
            VerdictEntry(
                result_id=row.pk,
                verdict=grader_verdict or verdict,
                score=score if grader_score is None else grader_score,
                reason=reason or error,
                source=VerdictSource.GRADER,
                harness_id=run.harness_id,
                at=row.created_at,
            )
        )
    VerdictEntry.objects.bulk_create(entries, batch_size=WRITE_BATCH)


def person_verdict_set(
    run: Run, result: CaseResult, *, verdict: str, note: str, by: User, at: datetime
) -> None:
    """Put a person's verdict over the grader's, which stays underneath; its history entry
    (after the settled verdict, when the result had no history yet)."""
    if not _with_history([result.pk]):
        _originals(run, [(result, _fields(result))])
    if result.verdict_by_id is None:
        result.grader_verdict, result.grader_score = result.verdict, result.score
    result.verdict, result.score = verdict, 1.0 if verdict == Verdict.PASS else 0.0
    result.verdict_by, result.verdict_at, result.verdict_note = by, at, note
    result.save(update_fields=PERSON_FIELDS)
    VerdictEntry.objects.create(
        result=result,
        verdict=verdict,
        score=result.score,
        source=VerdictSource.PERSON,
        by=by,
        note=note,
        at=at,
    )


def person_verdict_withdraw(result: CaseResult, *, by: User, at: datetime) -> None:
    """Withdraw the person's verdict: the grader's counts again; its history entry."""
    result.verdict = result.grader_verdict or Verdict.ERROR
    result.score = result.grader_score or 0.0
    result.verdict_by, result.verdict_at, result.verdict_note = None, None, ""
    result.grader_verdict, result.grader_score = "", None
    result.save(update_fields=PERSON_FIELDS)
    VerdictEntry.objects.create(
        result=result,
        verdict=result.verdict,
        score=result.score,
        reason=result.reason or result.error,
        source=VerdictSource.WITHDRAWN,
        by=by,
        at=at,
    )
