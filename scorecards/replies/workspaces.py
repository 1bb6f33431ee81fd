"""Reply shapes of workspaces and their members."""

from __future__ import annotations

from decimal import Decimal

from pydantic import Field, RootModel

from core.replies import Reply
from scorecards.models import Membership, Workspace


def _money(value: Decimal | None) -> float | None:
    return None if value is None else float(value)


class WorkspaceReply(Reply):
    slug: str
    name: str
    run_quota: int | None = Field(description="Runs per calendar month; null means unlimited.")
    budget_usd: float | None
    budget_tokens: int | None
    spent_usd: float
    spent_tokens: int
    role: str = Field(description="The caller's role: owner, admin, member or viewer.")

    @classmethod
    def of(cls, workspace: Workspace, role: str) -> WorkspaceReply:
        return cls(
            slug=workspace.slug,
            name=workspace.name,
            run_quota=workspace.run_quota,
            budget_usd=_money(workspace.budget_usd),
            budget_tokens=workspace.budget_tokens,
            spent_usd=float(workspace.spent_usd),
            spent_tokens=workspace.spent_tokens,
            role=role,
        )


class WorkspaceReplies(RootModel[list[WorkspaceReply]]):
    """The REST list of the caller's workspaces."""


class MemberReply(Reply):
    workspace: str
    username: str
    role: str

    @classmethod
    def of(cls, membership: Membership) -> MemberReply:
        return cls(
            workspace=membership.workspace.slug,
            username=membership.user.get_username(),
            role=membership.role,
        )
