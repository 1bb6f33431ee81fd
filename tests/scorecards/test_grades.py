"""The verdict rule, in one place: a person's verdict stands, and what a grader says goes
under it; otherwise what the grader says is the verdict, with its reason (cut to the column)."""

from __future__ import annotations

from typing import Any

import pytest

from runners.models import Runner
from scorecards.models import TEXT_CHARS, RunStatus
from scorecards.scoring import JUDGING, Grade
from scorecards.services import run_cancel
from scorecards.services.grades import graded, settled_fields
from scorecards.verdicts.services import verdict_set
from tests.scorecards.test_judging import laptop, run_case

__all__ = ["laptop"]


def test_what_the_grader_says_is_the_verdict_when_no_person_gave_one() -> None:
    fields = graded(Grade(verdict="fail", score=0.0, detail="expected `a`, got `b`"))

    assert fields == ("fail", 0.0, "", None, "expected `a`, got `b`", "")


def test_a_persons_verdict_stands_and_the_grade_goes_under_it() -> None:
    fields = graded(Grade(verdict="error", score=0.0, detail="timed out"), person=("pass", 1.0))

    assert fields == ("pass", 1.0, "error", 0.0, "timed out", "timed out")


def test_judges_due_are_a_grade_of_no_verdict_yet() -> None:
    assert graded(JUDGING, person=("fail", 0.0))[:4] == ("fail", 0.0, "judging", 0.0)
    assert graded(JUDGING)[:4] == ("judging", 0.0, "", None)


def test_a_settled_error_is_cut_to_what_its_columns_hold() -> None:
    said = settled_fields(Grade(verdict="error", score=2.0, detail="x" * (TEXT_CHARS + 5)))

    assert len(said["reason"]) == len(said["error"]) == TEXT_CHARS
    assert (said["verdict"], said["score"]) == ("error", 1.0)


@pytest.mark.django_db
def test_a_cancel_while_judges_are_due_writes_under_a_persons_verdict(
    alice: Any, laptop: Runner
) -> None:
    run = run_case(alice, laptop)
    verdict_set(user=alice, run_id=run.pk, key="c0", verdict="pass", note="I read it")

    run_cancel(user=alice, run_id=run.pk)

    row = run.results.get()
    assert (row.verdict, row.verdict_by) == ("pass", alice)
    assert (row.grader_verdict, row.error) == ("error", "canceled while judging")
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELED
