"""Runners: pairing, authentication, revocation, and a runner's `hello`."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts import tokens
from core import prebuilt
from core.errors import Invalid, NotFound
from runnercli.protocol import (
    MAX_CAPABILITIES,
    MAX_WAIT_MS,
    PROTOCOL_VERSION,
    Hello,
    Limits,
    is_capability,
)
from runnercli.protocol.features import SERVER_FEATURES
from runners import queue, revocations
from runners.models import PairingMethod, Runner
from runners.presence import runner_touch

if TYPE_CHECKING:
    from django.contrib.auth.models import User


@dataclass(frozen=True)
class PairedRunner:
    runner: Runner
    token: str


def runner_pair(
    *,
    owner: User,
    label: str,
    os: str = "",
    capabilities: list[str] | None = None,
    workspace_slug: str | None = None,
    via: PairingMethod | str = "",
) -> PairedRunner:
    """Pair a new runner for `owner`; the token is returned here and never again. `via` says
    how (the account page, REST, MCP or a device code)."""
    pairing_check(label, os, capabilities or [])
    token = tokens.new_secret(tokens.RUNNER_TOKEN_PREFIX)
    runner = Runner.objects.create(
        owner=owner,
        label=label,
        os=os,
        capabilities=sorted(set(capabilities or [])),
        token_hash=tokens.digest(token),
        token_prefix=tokens.display_prefix(token),
        workspace=_paired_from(owner, workspace_slug),
        paired_via=via,
    )
    return PairedRunner(runner=runner, token=token)


def pairing_check(label: str, os: str, capabilities: list[str]) -> None:
    """Refuse a label, OS or capability list no pairing may have (Invalid, by field)."""
    # Checked here, not only by each caller's form: the page, REST, MCP and devices share this.
    errors: dict[str, list[str]] = {}
    if not label.strip() or len(label) > 100 or "\x00" in label:
        errors["label"] = ["A label is 1 to 100 characters, without NUL."]
    if len(os) > 100 or "\x00" in os:
        errors["os"] = ["At most 100 characters, without NUL."]
    bad = [c for c in capabilities if not is_capability(c)]
    if bad or len(capabilities) > MAX_CAPABILITIES:
        errors["capabilities"] = [f"Invalid capabilities: {bad[:5]} (at most {MAX_CAPABILITIES})."]
    if errors:
        raise Invalid(errors)


def _paired_from(owner: User, slug: str | None) -> Any:
    """The workspace a runner is paired from (informative): one the owner belongs to.

    The workspace model belongs to the layer above (scorecards): it is reached through the
    runner's lazy relation and filtered by that model's own permission rule, `visible_to`.
    """
    if slug is None:
        return None
    workspaces: Any = Runner._meta.get_field("workspace").related_model
    found = workspaces.objects.visible_to(owner).filter(slug=slug).first()
    if found is None:
        # The same answer whether it does not exist or is not yours.
        raise Invalid({"workspace": ["No workspace with this slug that you belong to."]})
    return found


def runner_authenticate(token: str) -> Runner | None:
    """Return the active runner for a presented `rnr_` token, or None (revoked, unknown)."""
    if not token.startswith(tokens.RUNNER_TOKEN_PREFIX):
        return None
    # Every runner call (where its principal is not kept) looks its token up: the statement
    # `Runner.objects.active().select_related("owner").filter(token_hash=…)` would run,
    # built once.
    alias = Runner.objects.db
    lookup = prebuilt.with_parent(Runner, "owner", alias, ("token_hash",), ("revoked_at",))
    runner: Runner | None = lookup.get(alias, [tokens.digest(token)])
    if runner is None or not tokens.matches(token, runner.token_hash):
        return None
    if not runner.owner.is_active:
        return None
    return runner


def runner_get(*, owner: User, runner_id: int) -> Runner:
    """Return one of the owner's runners; anyone else's is NotFound, never Forbidden."""
    runner = Runner.objects.owned_by(owner).filter(pk=runner_id).first()
    if runner is None:
        raise NotFound("Runner not found.")
    return runner


@transaction.atomic
def runner_revoke(*, owner: User, runner_id: int) -> Runner:
    """Revoke a runner: its token stops working at once.

    The `self:any` jobs it held go back to the queue for the owner's other runners; jobs
    pinned to it are left for the scheduler to settle as "runner revoked".
    """
    runner = runner_get(owner=owner, runner_id=runner_id)
    if runner.revoked_at is None:
        Runner.objects.filter(pk=runner.pk, revoked_at__isnull=True).update(
            revoked_at=timezone.now()
        )
        runner.refresh_from_db()
        queue.jobs_release_from(runner=runner)
        revocations.announce_revoked(runner.pk)
    return runner


def owner_deactivated(sender: Any, instance: User, **kwargs: Any) -> None:
    """A deactivated user's runners stop authenticating at once, on every replica."""
    if instance.is_active or kwargs.get("raw"):
        return
    for runner_id in Runner.objects.filter(owner=instance).values_list("pk", flat=True):
        revocations.announce_revoked(runner_id)


def protocol_outdated(protocol: int) -> bool:
    return protocol < settings.EVERDICT_MIN_RUNNER_PROTOCOL


def runner_hello(
    *,
    runner: Runner,
    protocol: int,
    capabilities: Sequence[str],
    status: str = "",
    features: Sequence[str] = (),
    paused_reason: str | None = None,
) -> Hello:
    """Mark the runner present, keep what it reports, and tell it whether it must update.

    An empty capability list means "not reported": it never wipes the stored set. Its
    protocol and features are stored as said (a runner of protocol 2 has none), and so is
    why it pauses (`paused_reason`: "on battery"; "" when it leases; None: not said).
    """
    if capabilities:
        runner.update_capabilities(capabilities)
    if paused_reason is not None:
        runner.update_paused_reason(paused_reason)
    runner.update_features(protocol, features)
    runner_touch(runner=runner, status=status)
    return Hello(
        runner_id=runner.pk,
        label=runner.label,
        owner=runner.owner.get_username(),
        server_protocol=PROTOCOL_VERSION,
        update_required=protocol_outdated(protocol),
        # Every bound as the tools enforce it (the wire contract's), the rest as configured.
        limits=Limits(
            max_wait_ms=min(settings.EVERDICT_MAX_WAIT_MS, MAX_WAIT_MS),
            max_artifact_bytes=settings.EVERDICT_MAX_ARTIFACT_BYTES,
            max_case_artifact_bytes=settings.EVERDICT_MAX_CASE_ARTIFACT_BYTES,
            max_trace_events=settings.EVERDICT_MAX_TRACE_EVENTS,
            max_trace_bytes=settings.EVERDICT_MAX_TRACE_BYTES,
        ),
        latest_runner_version=latest_runner_version(),
        features=list(SERVER_FEATURES),
    )


def latest_runner_version() -> str:
    """The newest runner release this server tells runners of: EVERDICT_RUNNER_LATEST, or the
    server's own package version."""
    if settings.EVERDICT_RUNNER_LATEST:
        return settings.EVERDICT_RUNNER_LATEST
    try:
        return importlib.metadata.version("everdict")
    except importlib.metadata.PackageNotFoundError:
        return ""
