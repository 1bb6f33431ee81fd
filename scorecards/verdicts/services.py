"""A person's verdict on one result of a run: set with a note, withdrawn the same way. It
counts from then on (summary, compare, history), marked as a person's, and a regrade records
the grader's new verdict underneath without replacing it.

Every change is kept in the result's verdict history, written with it by the shared rule
(`scorecards.services.grades`); the verdict a result settled with is written there the first
time it changes, so unchanged results cost nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from core.errors import Conflict, Forbidden, Invalid, NotFound
from scorecards.links import key_may_exist
from scorecards.models import (
    TEXT_CHARS,
    Case,
    CaseResult,
    EventLevel,
    Role,
    Run,
    RunStatus,
    Verdict,
)
from scorecards.selectors.runs import repeat_of, run_get
from scorecards.selectors.workspaces import membership_for
from scorecards.services.events import event
from scorecards.services.grades import person_verdict_set, person_verdict_withdraw

if TYPE_CHECKING:
    from django.contrib.auth.models import User

PERSON_VERDICTS = (Verdict.PASS, Verdict.FAIL)
MAX_NOTE_CHARS = TEXT_CHARS


def run_for_member(*, user: User, run_id: int) -> Run:
    """A run the user may change verdicts of: member or above. Outsiders get NotFound,
    viewers Forbidden (they read)."""
    run = run_get(user=user, run_id=run_id)
    if not membership_for(user=user, slug=run.workspace.slug).allows(Role.MEMBER):
        raise Forbidden(f"This needs the {Role.MEMBER} role in workspace {run.workspace.slug!r}.")
    return run


def run_restate(run: Run) -> None:
    """After verdicts changed, a finished run is `failed` while a result is an error and
    `succeeded` otherwise (a canceled run stays canceled). The run's row is locked."""
    if run.status not in (RunStatus.SUCCEEDED, RunStatus.FAILED):
        return
    errors = CaseResult.objects.filter(run=run, verdict=Verdict.ERROR).exists()
    status = RunStatus.FAILED if errors else RunStatus.SUCCEEDED
    if status != run.status:
        run.status = status
        Run.objects.filter(pk=run.pk).update(status=status)


def _locked_result(run: Run, key: str, repeat: int | str | None) -> CaseResult:
    """The case's result on this repeat, its row locked (after the run's: the lock order)."""
    cases = Case.objects.filter(dataset_id=run.dataset_id, key=key)
    case = cases.first() if key_may_exist(key) else None
    if case is None:
        raise NotFound(f"Case {key!r} not found in run {run.pk}.")
    number = repeat_of(run, repeat)
    result = CaseResult.objects.select_for_update().filter(run=run, case=case, repeat=number)
    found = result.first()
    if found is None:
        raise Conflict(f"Case {key!r} (repeat {number}) has no result yet to give a verdict on.")
    return found


def _check(verdict: str, note: str) -> None:
    if verdict not in PERSON_VERDICTS:
        raise Invalid({"verdict": [f"Unknown verdict {verdict!r}: use pass or fail."]})
    if len(note) > MAX_NOTE_CHARS or "\x00" in note:
        raise Invalid({"note": [f"At most {MAX_NOTE_CHARS} characters, without NUL."]})


def _locked_run(run_id: int) -> Run:
    return Run.objects.select_for_update(of=("self",)).select_related("workspace").get(pk=run_id)


def verdict_set(
    *,
    user: User,
    run_id: int,
    key: str,
    verdict: str,
    note: str = "",
    repeat: int | str | None = None,
) -> CaseResult:
    """Set a person's verdict on one result (replacing an earlier person's verdict); the
    grader's stays recorded underneath."""
    _check(verdict, note)
    run_for_member(user=user, run_id=run_id)
    now = timezone.now()
    with transaction.atomic():
        run = _locked_run(run_id)
        result = _locked_result(run, key, repeat)
        person_verdict_set(run, result, verdict=verdict, note=note, by=user, at=now)
        run_restate(run)
        said = f" — {note}" if note else ""
        event(
            run,
            f"Case {key} (repeat {result.repeat}): {user.get_username()} set the verdict "
            f"{verdict} (the grader said {result.grader_verdict}){said}.",
        )
    return result


def verdict_withdraw(
    *, user: User, run_id: int, key: str, repeat: int | str | None = None
) -> CaseResult:
    """Withdraw the person's verdict on one result: the grader's counts again."""
    run_for_member(user=user, run_id=run_id)
    now = timezone.now()
    with transaction.atomic():
        run = _locked_run(run_id)
        result = _locked_result(run, key, repeat)
        if result.verdict_by_id is None:
            raise NotFound(f"Case {key!r} (repeat {result.repeat}) has no person's verdict.")
        person_verdict_withdraw(result, by=user, at=now)
        run_restate(run)
        event(
            run,
            f"Case {key} (repeat {result.repeat}): {user.get_username()} withdrew the "
            f"person's verdict; the grader's {result.verdict} counts again.",
            EventLevel.INFO,
        )
    return result
