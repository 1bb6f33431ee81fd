"""What a process verified lately and keeps for a while, so that a credential presented on
every request (a runner's token, an API key) is not looked up on every request.

The rules every such store keeps:

- an entry is kept at most `EVERDICT_AUTH_CACHE_S` since it was last verified;
- entries are kept only while `following()` says announcements of changes reach this
  process (PostgreSQL's NOTIFY, relayed by the process's listener); whoever relays them
  calls `forget`, and forgets everything when announcements may have been missed;
- a value verified while an announcement arrived is not kept (`generation` before the
  lookup, given back to `put`): the row read may predate the change;
- at most `MAX_ENTRIES` are kept; past that the store starts afresh.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from django.conf import settings

V = TypeVar("V")


def ttl() -> float:
    """How long an entry is kept since it was verified (seconds; 0 keeps nothing)."""
    return float(settings.EVERDICT_AUTH_CACHE_S)


class Kept(Generic[V]):
    MAX_ENTRIES = 100_000

    def __init__(self, following: Callable[[], bool] = lambda: False) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[V, float]] = {}  # key -> (value, verified at)
        self._generation = 0
        self._following = following

    def follow(self, following: Callable[[], bool]) -> None:
        """Keep entries while `following()` says announcements reach this process."""
        self._following = following

    def get(self, key: str) -> V | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            if found[1] + ttl() < time.monotonic():
                del self._entries[key]
                return None
            return found[0]

    def __len__(self) -> int:
        return len(self._entries)

    def generation(self) -> int:
        """Take before a lookup, give to `put` after it."""
        with self._lock:
            return self._generation

    def put(self, key: str, value: V, generation: int, verified_at: float) -> None:
        """Keep `value`, verified at `verified_at` (monotonic) by a lookup begun at
        `generation`, unless an announcement came between."""
        if ttl() <= 0 or not self._following():
            return
        with self._lock:
            if generation != self._generation:
                return
            if len(self._entries) >= self.MAX_ENTRIES:
                self._entries.clear()
            self._entries[key] = (value, verified_at)

    def forget(self, which: Callable[[V], bool] | None) -> None:
        """Forget the entries `which` names (every entry when None)."""
        with self._lock:
            self._generation += 1
            if which is None:
                self._entries.clear()
                return
            for key in [key for key, (value, _) in self._entries.items() if which(value)]:
                del self._entries[key]

    def aged(self, age: float) -> list[V]:
        """The values verified at least `age` seconds ago."""
        now = time.monotonic()
        with self._lock:
            return [value for value, at in self._entries.values() if now - at >= age]

    def verified(self, valid: Callable[[V], bool | None], began: float, generation: int) -> None:
        """After verifying entries again, in a lookup begun at `began` and `generation`:
        forget those `valid` says are no longer valid (False), and count those it says are
        (True) as verified at `began`, unless an announcement came meanwhile; those it does
        not speak of (None) stay as they were."""
        with self._lock:
            for key, (value, at) in list(self._entries.items()):
                still = valid(value)
                if still is None:
                    continue
                if not still:
                    del self._entries[key]
                elif generation == self._generation:
                    self._entries[key] = (value, max(at, began))
