"""Identity services: API keys and bearer resolution shared by DRF and MCP."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.db import connections
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


# Every API call looks its key up, so the lookup is one indexed statement whose SQL is built
# once: it is the query `ApiKey.objects.active().select_related("user").filter(key_hash=…)`
# would run (the same columns, converted by the same field converters), without compiling
# the queryset anew on each request, which costs several times the statement itself.
@cache
def _key_lookup(alias: str) -> tuple[str, prebuilt.Columns, prebuilt.Columns]:
    quote = connections[alias].ops.quote_name
    key, user = prebuilt.columns(ApiKey, alias), prebuilt.columns(get_user_model(), alias)
    key_table, user_table = ApiKey._meta.db_table, get_user_model()._meta.db_table
    selected = ", ".join(
        [f"k.{quote(f.column)}" for f in ApiKey._meta.concrete_fields]
        + [f"u.{quote(f.column)}" for f in get_user_model()._meta.concrete_fields]
    )
    user_pk = quote(get_user_model()._meta.pk.column)

    columns = {f.name: f.column for f in ApiKey._meta.concrete_fields}

    def column(name: str) -> str:
        return f"k.{quote(columns[name])}"

    sql = (
        f"SELECT {selected} FROM {quote(key_table)} k "
        f"JOIN {quote(user_table)} u ON u.{user_pk} = {column('user')} "
        f"WHERE {column('key_hash')} = %s AND {column('revoked_at')} IS NULL"
    )
    return sql, key, user


def _active_key_with_user(key_hash: str) -> ApiKey | None:
    """The unrevoked key with this hash, its user loaded with it, in one statement."""
    alias = ApiKey.objects.db
    sql, key, user = _key_lookup(alias)
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, [key_hash])
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(key.names)
    api_key: ApiKey = key.instance(alias, row[:split])
    api_key.user = user.instance(alias, row[split:])
    return api_key
