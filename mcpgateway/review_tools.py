"""Review tools: the review queue of a workspace (what needs a person, who reviewed what, and
how often people agreed with each judge), one result reviewed, and the harness list carrying
each harness's judges' agreement with people: the same selectors, services and replies as
REST (`/api/workspaces/<slug>/review`, `/api/results/<id>/review`, `/api/workspaces/<slug>/
harnesses`). A viewer may read but not review; an outsider is told nothing exists."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from core.replies import Reply
from mcpgateway.auth import current_principal
from mcpgateway.calls import in_thread
from scorecards.replies.catalog import HarnessItem
from scorecards.review.replies import QueueReply, ReviewItem
from scorecards.review.selectors import people_agreement, review_queue
from scorecards.review.services import MAX_NOTE_CHARS, review_act
from scorecards.selectors.catalog import harness_list

if TYPE_CHECKING:
    from django.contrib.auth.models import User

Id = Annotated[int, Field(ge=1, le=2**63 - 1)]


class HarnessList(Reply):
    """A workspace's harnesses at their latest versions, as REST lists them."""

    harnesses: list[HarnessItem]


def _queue(user: User, **kwargs: Any) -> QueueReply:
    queue = review_queue(user=user, **kwargs)
    agreement = people_agreement(workspace=queue.workspace, harness=kwargs["harness"])
    return QueueReply.of(queue, agreement)


def _reviewed(user: User, **kwargs: Any) -> ReviewItem:
    return ReviewItem.of(review_act(user=user, **kwargs))


def _harnesses(user: User, workspace: str) -> HarnessList:
    entries = harness_list(user=user, workspace_slug=workspace)
    return HarnessList(harnesses=[HarnessItem.of_entry(entry) for entry in entries])


async def get_review_queue(
    workspace: str,
    run_id: Annotated[Id | None, Field(description="One run's results.")] = None,
    harness: Annotated[
        str | None, Field(max_length=100, description="The newest runs of one harness.")
    ] = None,
) -> QueueReply:
    """The results of a workspace that need a person (judges split, a judge's answer
    unreadable, flaky across repeats, protected files changed, an error), each with its
    output, expected answer and judges' reasons; how many remain; who reviewed what; and per
    judge how often people agreed with it (`people_agreement`)."""
    user = current_principal().require_user("get_review_queue")
    return await in_thread(
        _queue, user=user, workspace_slug=workspace, run_id=run_id, harness=harness
    )


async def review_result(
    result_id: Annotated[Id, Field(description="An item's `result` in the queue.")],
    action: Annotated[
        Literal["pass", "fail", "confirm", "note"],
        Field(
            description="pass or fail: a person's verdict; confirm: the machine's verdict is "
            "right (it stands, and a later regrade still applies); note: a note only."
        ),
    ],
    note: Annotated[str, Field(max_length=MAX_NOTE_CHARS)] = "",
) -> ReviewItem:
    """Review one result of the queue (a member; a viewer is refused)."""
    user = current_principal().require_user("review_result")
    return await in_thread(_reviewed, user=user, result_id=result_id, action=action, note=note)


async def list_harnesses(workspace: str) -> HarnessList:
    """A workspace's harnesses at their latest versions, with how many versions each has and
    how often people agreed with each of its judges (`people_agreement`)."""
    user = current_principal().require_user("list_harnesses")
    return await in_thread(_harnesses, user=user, workspace=workspace)


REVIEW_TOOLS: list[Callable[..., Any]] = [get_review_queue, review_result, list_harnesses]
