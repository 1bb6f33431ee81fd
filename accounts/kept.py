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

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from prometheus_client import Counter

CHANNEL = "everdict_keys_changed"

API_KEY_LOOKUPS = Counter(
    "everdict_api_key_lookups",
    "API keys looked up for one request (not answered from the process's kept keys).",
)


@dataclass
class Kept:
    row: Sequence[Any]  # the key's row and its user's, as the lookup read them
    user_id: int
    verified_at: float  # monotonic
    last_used_at: Any  # the key's last use as written, which the row does not follow


class KeptKeys:
    MAX_ENTRIES = 100_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, Kept] = {}  # digest of the key -> what was verified
        self._generation = 0
        self._following: Callable[[], bool] = lambda: False

    def follow(self, following: Callable[[], bool]) -> None:
        """Keep keys while `following()` says announcements reach this process."""
        self._following = following

    def get(self, digest: str) -> Kept | None:
        with self._lock:
            found = self._entries.get(digest)
            if found is None:
                return None
            if found.verified_at + _ttl() < time.monotonic():
                del self._entries[digest]
                return None
            return found

    def generation(self) -> int:
        with self._lock:
            return self._generation

    def put(self, digest: str, kept: Kept, generation: int) -> None:
        """Keep a key verified since `generation`, unless an announcement came between."""
        if _ttl() <= 0 or not self._following():
            return
        with self._lock:
            if generation != self._generation:
                return
            if len(self._entries) >= self.MAX_ENTRIES:
                self._entries.clear()
            self._entries[digest] = kept

    def used(self, digest: str, at: Any) -> None:
        with self._lock:
            found = self._entries.get(digest)
            if found is not None:
                found.last_used_at = at

    def forget(self, user_id: int | None) -> None:
        """Forget this user's keys (every key when None)."""
        with self._lock:
            self._generation += 1
            if user_id is None:
                self._entries.clear()
                return
            for digest in [d for d, k in self._entries.items() if k.user_id == user_id]:
                del self._entries[digest]


def _ttl() -> float:
    return float(settings.EVERDICT_AUTH_CACHE_S)


kept_keys = KeptKeys()


def relay(user_id: int | None) -> None:
    """An announcement reached this process: forget the user's keys (None: announcements may
    have been missed, forget them all)."""
    kept_keys.forget(user_id)


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
