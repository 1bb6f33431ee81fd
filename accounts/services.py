"""Identity services: API keys and bearer resolution shared by DRF and MCP."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from accounts import kept, tokens
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
    """Revoke one of the user's keys; False when it is not theirs or already revoked. Every
    process forgets the keys it keeps for the user as the revocation commits."""
    with transaction.atomic():
        revoked = (
            ApiKey.objects.owned_by(user)
            .active()
            .filter(pk=key_id)
            .update(revoked_at=timezone.now())
        )
        if revoked:
            kept.announce_changed(user.pk)
    return revoked == 1


def api_key_authenticate(secret: str) -> ApiKey | None:
    """Return the active key for a presented `evk_` secret, or None.

    A key verified lately is answered from what this process keeps (`accounts.kept`), as
    new instances; otherwise it is looked up in one statement."""
    if not secret.startswith(tokens.API_KEY_PREFIX):
        return None
    digest = tokens.digest(secret)
    alias = ApiKey.objects.db
    lookup = _lookup(alias)
    found = kept.kept_keys.get(digest)
    if found is not None:
        api_key: ApiKey = lookup.build(alias, found.row)
        api_key.last_used_at = found.last_used_at
    else:
        generation, began = kept.kept_keys.generation(), time.monotonic()
        kept.API_KEY_LOOKUPS.inc()
        row = lookup.fetch(alias, [digest])
        if row is None:
            return None
        api_key = lookup.build(alias, row)
        if api_key.user.is_active:
            found = kept.KeptKey(row, api_key.user_id, api_key.last_used_at)
            kept.kept_keys.put(digest, found, generation, began)
    if not tokens.matches(secret, api_key.key_hash) or not api_key.user.is_active:
        return None
    now = timezone.now()
    if api_key.last_used_at is None or now - api_key.last_used_at > _LAST_USED_WRITE_INTERVAL:
        ApiKey.objects.filter(pk=api_key.pk).update(last_used_at=now)
        api_key.last_used_at = now
        kept.kept_keys.used(digest, now)
    return api_key


def _lookup(alias: str) -> prebuilt.WithParent:
    """The unrevoked key with a hash, its user loaded with it, in one statement.

    Every API call not answered from the kept keys looks its key up, so the statement is
    the one `ApiKey.objects.active().select_related("user").filter(key_hash=…)` would run,
    built once (`core.prebuilt`): compiling the queryset costs several times the statement."""
    return prebuilt.with_parent(ApiKey, "user", alias, ("key_hash",), ("revoked_at",))
