"""API keys verified lately, kept by the process so that a client's every request does not
look its key up again (the statement and its two rows were a sixth of a short request).

A key is kept for EVERDICT_AUTH_CACHE_S at most since it was verified, and only while the
process follows announcements (PostgreSQL's NOTIFY, relayed by the process's listener): a
change to a key or to its user — a key revoked, a user deactivated, edited or deleted — is
announced to every process as part of the transaction that made it, and each forgets that
user's keys as the announcement arrives. A process that stops following (the listener
reconnecting) forgets every key and keeps none until it follows again. What no
announcement covers (a user deactivated by a bare `UPDATE`) holds within the bound.
On SQLite, or in a process without the listener, nothing is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from prometheus_client import Counter

from core.kept import Kept

CHANNEL = "everdict_keys_changed"

API_KEY_LOOKUPS = Counter(
    "everdict_api_key_lookups",
    "API keys looked up for one request (not answered from the process's kept keys).",
)


@dataclass
class KeptKey:
    row: Sequence[Any]  # the key's row and its user's, as the lookup read them
    user_id: int
    last_used_at: Any  # the key's last use as written, which the row does not follow


class KeptKeys(Kept[KeptKey]):
    """API keys by the digest of their secret (`core.kept`'s rules)."""

    def used(self, digest: str, at: Any) -> None:
        """The key's last use was written: the kept entry follows it."""
        found = self.get(digest)
        if found is not None:
            found.last_used_at = at

    def forget_user(self, user_id: int | None) -> None:
        """Forget this user's keys (every key when None)."""
        self.forget(None if user_id is None else lambda kept: kept.user_id == user_id)


kept_keys = KeptKeys()


def relay(user_id: int | None) -> None:
    """An announcement reached this process: forget the user's keys (None: announcements may
    have been missed, forget them all)."""
    kept_keys.forget_user(user_id)


def announce_changed(user_id: int) -> None:
    """Announce, as part of the current transaction, that this user's keys or the user
    changed: every process forgets the keys it keeps for them once it commits."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, str(user_id)])
    transaction.on_commit(lambda: relay(user_id))


def user_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A user saved or deleted (the admin's pages, a sign-in): their keys are verified again."""
    if not kwargs.get("raw"):
        announce_changed(instance.pk)


def key_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A key saved or deleted through the ORM (the admin's pages)."""
    if not kwargs.get("raw"):
        announce_changed(instance.user_id)
