"""A person's look at one result from the queue: pass or fail (a person's verdict, through the
verdicts service), confirm (the machine's verdict stands, recorded as agreement), or a note."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.errors import Conflict, Invalid, NotFound
from scorecards.models import CaseResult, Verdict
from scorecards.review.models import Review, ReviewAction
from scorecards.verdicts.services import MAX_NOTE_CHARS, run_for_member, verdict_set

__all__ = ["MAX_NOTE_CHARS", "review_act"]

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def review_act(*, user: User, result_id: int, action: str, note: str = "") -> Review:
    """Record what `user` says of the result: members and above; a viewer is refused (403),
    an outsider finds nothing (404)."""
    if action not in ReviewAction.values:
        raise Invalid({"action": [f"Unknown action {action!r}: use pass, fail, confirm or note."]})
    if len(note) > MAX_NOTE_CHARS or "\x00" in note:
        raise Invalid({"note": [f"At most {MAX_NOTE_CHARS} characters, without NUL."]})
    if action == ReviewAction.NOTE and not note.strip():
        raise Invalid({"note": ["A note needs its text."]})
    found = CaseResult.objects.filter(pk=result_id).values_list("run_id", flat=True).first()
    if found is None:
        raise NotFound("Result not found.")
    run = run_for_member(user=user, run_id=found)
    result = CaseResult.objects.select_related("case").get(pk=result_id)
    if result.verdict in (Verdict.JUDGING, Verdict.SKIPPED):
        raise Conflict(f"Case {result.case.key!r} has no verdict to review yet.")
    machine = result.grader_verdict if result.verdict_by_id else result.verdict
    if action in (ReviewAction.PASS, ReviewAction.FAIL):
        result = verdict_set(
            user=user,
            run_id=run.pk,
            key=result.case.key,
            verdict=action,
            note=note,
            repeat=result.repeat,
        )
        machine = result.grader_verdict
    return Review.objects.create(
        result=result, by=user, action=action, machine_verdict=machine, note=note
    )
