"""Identity services: API keys and bearer resolution shared by DRF and MCP."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from django.utils import timezone

from accounts import tokens
from accounts.models import ApiKey
from core import prebuilt

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# last_used_at is informative: write it at most this often per key, not on every call.
_LAST_USED_WRITE_INTERVAL = timedelta(seconds=60)


@dataclass(frozen=True)
class IssuedApiKey:
    api_key: ApiKey
    key: str


def api_key_create(*, user: User, name: str = "") -> IssuedApiKey:
    """Create a personal API key; the plaintext is returned here and never again."""
    key = tokens.new_secret(tokens.API_KEY_PREFIX)
    api_key = ApiKey.objects.create(
        user=user, name=name, prefix=tokens.display_prefix(key), key_hash=tokens.digest(key)
    )
    return IssuedApiKey(api_key=api_key, key=key)


def api_key_revoke(*, user: User, key_id: int) -> bool:
    """Revoke one of the user's keys; False when it is not theirs or already revoked."""
    return (
        ApiKey.objects.owned_by(user).active().filter(pk=key_id).update(revoked_at=timezone.now())
        == 1
    )


def api_key_authenticate(secret: str) -> ApiKey | None:
    """Return the active key for a presented `evk_` secret, or None."""
    if not secret.startswith(tokens.API_KEY_PREFIX):
        return None
    api_key = _active_key_with_user(tokens.digest(secret))
    if api_key is None or not tokens.matches(secret, api_key.key_hash):
        return None
    if not api_key.user.is_active:
        return None
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > _LAST_USED_WRITE_INTERVAL:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
    return api_key


def _active_key_with_user(key_hash: str) -> ApiKey | None:
    """The unrevoked key with this hash, its user loaded with it, in one statement.

    Every API call looks its key up, so the statement is the one
    `ApiKey.objects.active().select_related("user").filter(key_hash=…)` would run, built
    once (`core.prebuilt`): compiling the queryset costs several times the statement."""
    alias = ApiKey.objects.db
    lookup = prebuilt.with_parent(ApiKey, "user", alias, ("key_hash",), ("revoked_at",))
    found: ApiKey | None = lookup.get(alias, [key_hash])
    return found
