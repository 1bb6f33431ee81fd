"""Device pairing (RFC 8628's shape): a machine asks for a code, a signed-in member approves
it, the machine collects its runner token once.

No secret is kept: the device code is stored as its SHA-256, and the runner — and so its
token — is made only when the machine collects it, for the member who approved.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from accounts import tokens
from core.errors import Conflict, NotFound
from runnercli.protocol.device import (
    DEVICE_CODE_PREFIX,
    USER_CODE_ALPHABET,
    DeviceTokenErrorCode,
)
from runners.models import DevicePairing, DevicePairingStatus, PairingMethod
from runners.services import PairedRunner, pairing_check, runner_pair

if TYPE_CHECKING:
    from django.contrib.auth.models import User

SLOW_DOWN_STEP_S = 5  # RFC 8628 §3.5: each too-early poll adds 5 s to the interval
_CODE_LETTERS = 8


class PollRefused(Exception):
    """A token poll answered with an RFC 8628 error instead of a token."""

    def __init__(self, error: DeviceTokenErrorCode, description: str = "") -> None:
        super().__init__(description or error)
        self.error = error
        self.description = description


@dataclass(frozen=True)
class IssuedPairing:
    pairing: DevicePairing
    device_code: str


def user_code_new() -> str:
    letters = "".join(secrets.choice(USER_CODE_ALPHABET) for _ in range(_CODE_LETTERS))
    return f"{letters[:4]}-{letters[4:]}"


def user_code_normal(raw: str) -> str | None:
    """The code as stored (`WDJB-MJHT`) from what a member typed (`wdjb mjht`), or None."""
    letters = "".join(c for c in raw.upper() if c.isalnum())
    if len(letters) != _CODE_LETTERS or any(c not in USER_CODE_ALPHABET for c in letters):
        return None
    return f"{letters[:4]}-{letters[4:]}"


def device_pairing_create(
    *, label: str, os: str, capabilities: list[str], requested_from: str, user_agent: str
) -> IssuedPairing:
    """Open a pairing request for a machine; its device code is returned here only."""
    pairing_check(label, os, capabilities)
    device_code = tokens.new_secret(DEVICE_CODE_PREFIX)
    now = timezone.now()
    for _ in range(5):
        try:
            with transaction.atomic():
                pairing = DevicePairing.objects.create(
                    device_code_hash=tokens.digest(device_code),
                    user_code=user_code_new(),
                    label=label,
                    os=os,
                    capabilities=sorted(set(capabilities)),
                    requested_from=requested_from[:100],
                    user_agent=user_agent[:300],
                    created_at=now,
                    expires_at=now + timedelta(seconds=settings.EVERDICT_DEVICE_PAIRING_TTL_S),
                    interval_s=settings.EVERDICT_DEVICE_PAIRING_INTERVAL_S,
                )
        except IntegrityError:
            continue  # a user code drawn twice (1 in 2.5e10): draw again
        return IssuedPairing(pairing=pairing, device_code=device_code)
    raise RuntimeError("no free user code after 5 draws")


def device_pairing_poll(*, device_code: str) -> PairedRunner:
    """The machine's poll: its runner and token once approved, else PollRefused."""
    now = timezone.now()
    pairing = DevicePairing.objects.filter(device_code_hash=tokens.digest(device_code)).first()
    if pairing is None or pairing.status == DevicePairingStatus.CONSUMED:
        raise PollRefused("invalid_grant", "No such pairing request, or its token was collected.")
    if now >= pairing.expires_at:
        raise PollRefused("expired_token", "The code expired before the machine was paired.")
    if pairing.status == DevicePairingStatus.DENIED:
        raise PollRefused("access_denied", "The pairing request was denied.")
    _poll_paced(pairing, now)
    if pairing.status == DevicePairingStatus.PENDING:
        raise PollRefused("authorization_pending")
    return _collect(pairing, now)


def _poll_paced(pairing: DevicePairing, now: Any) -> None:
    """Record this poll; refuse it (slow_down) when it comes before the interval is over."""
    rows = DevicePairing.objects.filter(pk=pairing.pk)
    early = pairing.last_polled_at is not None and now - pairing.last_polled_at < timedelta(
        seconds=pairing.interval_s
    )
    if early:
        rows.update(last_polled_at=now, interval_s=F("interval_s") + SLOW_DOWN_STEP_S)
        raise PollRefused("slow_down", f"Poll at most every {pairing.interval_s + 5} s.")
    # Compare-and-set: of two polls racing, one goes on, the other is early.
    if not rows.filter(last_polled_at=pairing.last_polled_at).update(last_polled_at=now):
        raise PollRefused("slow_down", f"Poll at most every {pairing.interval_s} s.")


def _collect(pairing: DevicePairing, now: Any) -> PairedRunner:
    owner = pairing.decided_by
    if owner is None or not owner.is_active:
        raise PollRefused("access_denied", "The member who approved is no longer active.")
    with transaction.atomic():
        taken = DevicePairing.objects.filter(
            pk=pairing.pk, status=DevicePairingStatus.APPROVED, expires_at__gt=now
        ).update(status=DevicePairingStatus.CONSUMED)
        if taken != 1:
            raise PollRefused("invalid_grant", "This pairing's token was already collected.")
        paired = runner_pair(
            owner=owner,
            label=pairing.label,
            os=pairing.os,
            capabilities=list(pairing.capabilities),
            via=PairingMethod.DEVICE,
        )
        DevicePairing.objects.filter(pk=pairing.pk).update(runner=paired.runner)
    return paired


def device_pairing_open(*, user: User, user_code: str) -> DevicePairing:
    """The request behind a code, for its page; a pending one is listed on the member's
    account page from now on."""
    pairing = _by_code(user_code)
    DevicePairing.objects.filter(pk=pairing.pk, status=DevicePairingStatus.PENDING).update(
        opened_by=user
    )
    return pairing


def device_pairing_decide(*, user: User, user_code: str, approve: bool) -> DevicePairing:
    """Approve (the machine becomes `user`'s runner when it collects its token) or deny a
    pending, unexpired request."""
    pairing = _by_code(user_code)
    now = timezone.now()
    decided = DevicePairingStatus.APPROVED if approve else DevicePairingStatus.DENIED
    changed = DevicePairing.objects.filter(
        pk=pairing.pk, status=DevicePairingStatus.PENDING, expires_at__gt=now
    ).update(status=decided, decided_by=user, decided_at=now)
    pairing.refresh_from_db()
    if changed:
        return pairing
    if pairing.status == DevicePairingStatus.PENDING:
        raise Conflict("This code has expired: run the pair command again for a new one.")
    raise Conflict(f"This pairing request was already {pairing.get_status_display().lower()}.")


def device_pairings_waiting(*, user: User) -> QuerySet[DevicePairing]:
    """What the member has to act on or wait for: requests they opened and have not decided,
    and those they approved that the machine has not collected yet."""
    mine = Q(opened_by=user, status=DevicePairingStatus.PENDING) | Q(
        decided_by=user, status=DevicePairingStatus.APPROVED
    )
    return DevicePairing.objects.filter(mine, expires_at__gt=timezone.now())


def _by_code(user_code: str) -> DevicePairing:
    code = user_code_normal(user_code)
    pairing = DevicePairing.objects.filter(user_code=code).first() if code else None
    if pairing is None:
        raise NotFound("No pairing request has this code.")
    return pairing
