"""Who may do what in a workspace. Someone outside a workspace sees nothing of it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.errors import Forbidden, NotFound
from scorecards.models import Membership

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def membership_for(*, user: User, slug: str) -> Membership:
    """Return the user's membership of the workspace; outsiders get NotFound."""
    membership = (
        Membership.objects.select_related("workspace")
        .filter(workspace__slug=slug, user=user)
        .first()
    )
    if membership is None:
        raise NotFound("Workspace not found.")
    return membership


def require_role(*, user: User, slug: str, role: str) -> Membership:
    """Return the membership if it allows `role`; a weaker member is refused (403)."""
    membership = membership_for(user=user, slug=slug)
    if not membership.allows(role):
        raise Forbidden(f"This needs the {role} role in workspace {slug!r}.")
    return membership


def memberships_of(user: User) -> list[Membership]:
    """The user's workspaces, by slug."""
    return list(
        Membership.objects.filter(user=user).select_related("workspace").order_by("workspace__slug")
    )
