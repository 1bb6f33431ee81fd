"""Verdict tools: regrade a run's stored outputs, and a person's verdict on one case — the
same services and replies as `POST /api/runs/<id>/regrade` and `PUT`/`DELETE
/api/runs/<id>/verdict` (member or above; anyone outside the workspace is told it does not
exist)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from mcpgateway.auth import current_principal
from mcpgateway.calls import in_thread
from scorecards.selectors.summary import run_summary
from scorecards.verdicts.regrades import run_regrade
from scorecards.verdicts.replies import RegradeReply, VerdictReply
from scorecards.verdicts.services import MAX_NOTE_CHARS, verdict_set, verdict_withdraw

if TYPE_CHECKING:
    from django.contrib.auth.models import User

RunId = Annotated[int, Field(ge=1, le=2**63 - 1)]
Repeat = Annotated[
    int | None, Field(ge=0, description="Which repeat (0-based), when the run has several.")
]


def _regraded(user: User, run_id: int, harness_version: int | None) -> RegradeReply:
    return RegradeReply.of(run_regrade(user=user, run_id=run_id, harness_version=harness_version))


def _set(user: User, key: str, **kwargs: Any) -> VerdictReply:
    result = verdict_set(user=user, key=key, **kwargs)
    return VerdictReply.of(result, key, run_summary(result.run))


def _withdrawn(user: User, key: str, **kwargs: Any) -> VerdictReply:
    result = verdict_withdraw(user=user, key=key, **kwargs)
    return VerdictReply.of(result, key, run_summary(result.run))


async def regrade_run(
    run_id: RunId,
    harness_version: Annotated[
        int | None, Field(ge=1, description="Apply this version's grader. Default: the current.")
    ] = None,
) -> RegradeReply:
    """Score a finished run's stored outputs again on the server (no case runs again),
    optionally with the grader of another version of the same harness."""
    user = current_principal().require_user("regrade_run")
    return await in_thread(_regraded, user=user, run_id=run_id, harness_version=harness_version)


async def set_verdict(
    run_id: RunId,
    key: str,
    verdict: Literal["pass", "fail"],
    note: Annotated[str, Field(max_length=MAX_NOTE_CHARS)] = "",
    repeat: Repeat = None,
) -> VerdictReply:
    """Set your verdict on a case of a run, with a note: it counts in the summary, compare
    and history, marked as yours, until it is withdrawn."""
    user = current_principal().require_user("set_verdict")
    return await in_thread(
        _set, user=user, run_id=run_id, key=key, verdict=verdict, note=note, repeat=repeat
    )


async def withdraw_verdict(run_id: RunId, key: str, repeat: Repeat = None) -> VerdictReply:
    """Withdraw a person's verdict on a case: the grader's counts again."""
    user = current_principal().require_user("withdraw_verdict")
    return await in_thread(_withdrawn, user=user, run_id=run_id, key=key, repeat=repeat)


VERDICT_TOOLS: list[Callable[..., Any]] = [regrade_run, set_verdict, withdraw_verdict]
