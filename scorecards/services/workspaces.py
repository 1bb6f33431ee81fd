"""Workspaces and memberships: create, rename, set quota and budget, add members."""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from core.errors import Conflict, Forbidden, Invalid
from scorecards.models import Membership, Role, Workspace
from scorecards.selectors.workspaces import require_role

if TYPE_CHECKING:
    from django.contrib.auth.models import User


@transaction.atomic
def workspace_create(*, user: User, slug: str, name: str) -> Workspace:
    """Create a workspace; the caller becomes its owner."""
    try:
        with transaction.atomic():
            workspace = Workspace.objects.create(slug=slug, name=name)
    except IntegrityError as exc:
        raise Conflict({"slug": [f"Workspace {slug!r} already exists."]}) from exc
    Membership.objects.create(workspace=workspace, user=user, role=Role.OWNER)
    return workspace


def workspace_update(*, user: User, slug: str, changes: dict[str, Any]) -> Workspace:
    """Rename (admin) or set quota and budget (owner)."""
    owner_fields = {"run_quota", "budget_usd", "budget_tokens"}
    needed = Role.OWNER if owner_fields & changes.keys() else Role.ADMIN
    workspace = require_role(user=user, slug=slug, role=needed).workspace
    for field, value in changes.items():
        if field == "budget_usd" and value is not None:
            value = Decimal(str(value))
        setattr(workspace, field, value)
    workspace.save(update_fields=list(changes) or None)
    return workspace


def member_add(*, user: User, slug: str, username: str, role: str) -> Membership:
    """Add or change a member (admin); only an owner grants or changes ownership."""
    acting = require_role(user=user, slug=slug, role=Role.ADMIN)
    if role not in Role.values:
        raise Invalid({"role": [f"Must be one of {', '.join(Role.values)}."]})
    target = get_user_model().objects.filter(username=username, is_active=True).first()
    if target is None:
        raise Invalid({"username": [f"No user named {username!r}."]})
    existing = Membership.objects.filter(workspace=acting.workspace, user=target).first()
    touches_owner = role == Role.OWNER or (existing is not None and existing.role == Role.OWNER)
    if touches_owner and not acting.allows(Role.OWNER):
        raise Forbidden("Only an owner can grant or change the owner role.")
    membership, _ = Membership.objects.update_or_create(
        workspace=acting.workspace, user=target, defaults={"role": role}
    )
    return membership
