"""Grading reported results before anything is locked: output parsed, graded and its usage
read while no transaction holds a run's row (nor, on SQLite, the single write lock). What
grading reads — a run's harness version, a case's expectation — is immutable, so a grade
taken before the lock is the grade the locked transaction records.

Also the bounded copy of a result kept as a shadow when the fence refuses it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection

from core import prebuilt
from runnercli.protocol import CaseResult, HarnessSpec, ResultReport
from runners import metrics
from runners.models import Runner
from scorecards import scoring
from scorecards.lifecycle import LANES, Read
from scorecards.models import Case, HarnessVersion
from scorecards.verifying import verified_fields


@dataclass(frozen=True)
class Graded:
    """One reported result, graded: what the settle transaction records if it is accepted."""

    case: Case
    grade: scoring.Grade
    output: str
    stderr_tail: str
    usage: dict[str, Any] | None


def storable(text: str) -> str:
    # PostgreSQL text cannot hold NUL; a harness printing binary must not lose its result.
    return text.replace("\x00", "\ufffd")


def grade_reports(*, runner: Runner, reports: Sequence[ResultReport]) -> dict[int, Graded | Read]:
    """Grade each report of one of the runner owner's jobs, by job id (no lock taken): each
    job with its run's harness spec and its case, read in one written-out statement (what a
    batch costs to read does not grow with it in statements, nor in ORM query building). A
    job of another lane (a judge's) is read by its lane."""
    rows = _grading_rows([r.job_id for r in reports], runner.owner_id)
    specs: dict[int, HarnessSpec] = {}
    graded: dict[int, Graded | Read] = {}
    for report in reports:
        row = rows.get(report.job_id)
        if row is None:
            continue
        lane = LANES.get(row.kind)
        if lane is not None:
            graded[report.job_id] = Read(lane, lane.read(report.result))
            continue
        if row.case is not None:
            if (spec := specs.get(row.run_id)) is None:
                spec = specs[row.run_id] = HarnessSpec.model_validate(row.spec)
            metrics.GRADINGS.inc()
            graded[report.job_id] = grade_one(spec, row.case, report.result)
    return graded


@dataclass(frozen=True)
class _GradingRow:
    run_id: int
    kind: str
    spec: Any
    case: Case | None


# A job, its run's harness spec and its case (by the run's dataset and the job's case key).
# Each step is the one way to read it whatever the statistics say, which trail tables that
# grow fast from empty (a first run of thousands of cases): the jobs by their ids, their
# owner checked on the rows (asked of the database, an owner's index may be read instead,
# all their jobs); on PostgreSQL the case in a lateral subquery on its whole unique key,
# which its `LIMIT` keeps from being merged into the join (as a join's two clauses, it may
# be looked up by the dataset alone, every case of it read for each job). SQLite has no
# lateral join; its planner takes a unique key whole when both its columns are given.
_GRADING_SQL = (
    "SELECT j.id, j.owner_id, j.run_id, j.kind, h.spec,"
    " c.id, c.dataset_id, c.key, c.expected, c.tests"
    " FROM runners_runnerjob j"
    " JOIN scorecards_run r ON r.id = j.run_id"
    " JOIN scorecards_harnessversion h ON h.id = r.harness_id"
    " {case_join}"
    " WHERE j.id IN ({ids})"
)
_CASE_LATERAL = (
    "LEFT JOIN LATERAL (SELECT k.id, k.dataset_id, k.key, k.expected, k.tests"
    " FROM scorecards_case k WHERE k.dataset_id = r.dataset_id AND k.key = j.case_key"
    " LIMIT 1) c ON TRUE"
)
_CASE_JOIN = "LEFT JOIN scorecards_case c ON c.dataset_id = r.dataset_id AND c.key = j.case_key"
_CASE_FIELDS = ["id", "dataset_id", "key", "expected", "tests"]


def _grading_sql(count: int) -> str:
    return _GRADING_SQL.format(
        case_join=_CASE_LATERAL if connection.vendor == "postgresql" else _CASE_JOIN,
        ids=", ".join(["%s"] * count),
    )


def grading_plan(job_ids: Sequence[int]) -> str:
    """PostgreSQL's plan for grading these jobs as a connection that prepared the statement
    may keep it (for tests)."""
    return prebuilt.generic_plan(connection.alias, _grading_sql(len(job_ids)), list(job_ids))


def _grading_rows(job_ids: Sequence[int], owner_id: int) -> dict[int, _GradingRow]:
    if not job_ids:
        return {}
    sql = _grading_sql(len(job_ids))
    with prebuilt.cursor(connection.alias) as cursor:
        cursor.execute(sql, list(job_ids))
        fetched = cursor.fetchall()
    spec_field = HarnessVersion._meta.get_field("spec")
    expected_field = Case._meta.get_field("expected")
    tests_field = Case._meta.get_field("tests")
    rows: dict[int, _GradingRow] = {}
    for job_id, owner, run_id, kind, spec, case_id, dataset_id, key, expected, tests in fetched:
        if owner != owner_id:
            continue
        case = None
        if case_id is not None:
            # Only the fields grading reads; any other is read on access, as `.only()` does.
            case = Case.from_db(
                connection.alias,
                _CASE_FIELDS,
                [
                    case_id,
                    dataset_id,
                    key,
                    _json(expected_field, expected),
                    _json(tests_field, tests),
                ],
            )
        rows[job_id] = _GradingRow(run_id, kind, _json(spec_field, spec), case)
    return rows


def _json(field: Any, value: Any) -> Any:
    """A JSON column's value as the ORM gives it (the backends return text, or a decoded
    value where the driver decodes it)."""
    return field.from_db_value(value, None, connection) if isinstance(value, str) else value


def grade_one(spec: HarnessSpec, case: Case, result: CaseResult) -> Graded:
    output, stderr_tail = storable(result.output), storable(result.stderr_tail)
    grade = scoring.grade(
        spec=spec,
        status=result.status,
        output=output,
        exit_code=result.exit_code,
        expected=case.expected,
        **verified_fields(result),
        tests=case.tests,
    )
    return Graded(
        case=case,
        grade=grade,
        output=output,
        stderr_tail=stderr_tail,
        usage=scoring.extract_usage(output, spec.output, result.usage),
    )


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


def _cut(text: str, limit: int) -> str:
    return text.encode()[: max(0, limit)].decode(errors="ignore")


def shadow_of(result: CaseResult) -> tuple[dict[str, Any], str]:
    """The result as kept on its attempt when refused, within EVERDICT_SHADOW_MAX_BYTES: the
    output (then the stderr tail) cut to fit, and a note saying so (empty when whole)."""
    limit = settings.EVERDICT_SHADOW_MAX_BYTES
    kept = result.model_dump(mode="json")
    kept["output"], kept["stderr_tail"] = storable(result.output), storable(result.stderr_tail)
    size = _size(kept)
    if size <= limit:
        return kept, ""
    notes = []
    for field in ("log_tail", "usage"):
        if size > limit and kept.get(field):
            kept[field] = [] if field == "log_tail" else None
            size = _size(kept)
    for field in ("output", "stderr_tail"):
        if size <= limit:
            break
        before = len(kept[field].encode())
        # JSON escaping can make text grow: cut by what is over, then check again.
        while size > limit and kept[field]:
            kept[field] = _cut(kept[field], len(kept[field].encode()) - (size - limit) - 16)
            size = _size(kept)
        notes.append(f"{field} cut from {before} to {len(kept[field].encode())} bytes")
    return kept, f"{', '.join(notes) or 'cut'} to fit EVERDICT_SHADOW_MAX_BYTES ({limit})"
