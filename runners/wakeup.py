"""Wake-ups for parked long-polls: a job became claimable for an owner.

A dispatch, requeue or admission calls `notify_owners()` inside its transaction. On
PostgreSQL that issues `pg_notify`, which the server delivers only if and when the
transaction commits, to every process (every replica) listening; each process also
wakes its own waiters right after commit. Waiters re-check the queue periodically as
well, so a lost notification costs latency, never a job.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import connection, transaction

log = logging.getLogger(__name__)

CHANNEL = "everdict_jobs"


class _Waiter:
    __slots__ = ("event", "loop")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.event = asyncio.Event()

    def wake(self) -> None:
        self.loop.call_soon_threadsafe(self.event.set)


class WakeHub:
    """Process-local registry of parked long-polls, keyed by owner id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[int, set[_Waiter]] = defaultdict(set)

    @contextmanager
    def waiting(self, owner_id: int) -> Iterator[asyncio.Event]:
        # Registered before the caller checks the queue, so a dispatch committing between
        # that check and the wait still wakes it.
        waiter = _Waiter()
        with self._lock:
            self._waiters[owner_id].add(waiter)
        try:
            yield waiter.event
        finally:
            with self._lock:
                bucket = self._waiters.get(owner_id)
                if bucket is not None:
                    bucket.discard(waiter)
                    if not bucket:
                        del self._waiters[owner_id]

    def wake(self, owner_ids: Iterable[int]) -> None:
        with self._lock:
            targets = [w for oid in set(owner_ids) for w in self._waiters.get(oid, ())]
        for waiter in targets:
            try:
                waiter.wake()
            except RuntimeError:  # its loop has closed
                pass

    def parked(self) -> int:
        with self._lock:
            return sum(len(bucket) for bucket in self._waiters.values())


hub = WakeHub()


def notify_owners(owner_ids: Iterable[int]) -> None:
    """Announce, as part of the current transaction, that these owners have claimable jobs."""
    owners = sorted(set(owner_ids))
    if not owners:
        return
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for owner_id in owners:
                cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, str(owner_id)])
    transaction.on_commit(lambda: hub.wake(owners))


class _PgListener:
    """One LISTEN connection per process that relays notifications to the local hub."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def ensure_started(self) -> None:
        if connection.vendor != "postgresql":
            return
        loop = asyncio.get_running_loop()
        if self._task is not None and not self._task.done() and self._loop is loop:
            return
        self._loop = loop
        self._task = loop.create_task(self._listen_forever())

    async def _listen_forever(self) -> None:
        import psycopg

        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    _pg_conninfo(), autocommit=True
                ) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    async for note in conn.notifies():
                        try:
                            hub.wake([int(note.payload)])
                        except ValueError:
                            continue
            except asyncio.CancelledError:
                raise
            except Exception:
                # Waiters fall back to their periodic re-check meanwhile.
                log.warning("job notification listener lost; reconnecting", exc_info=True)
                await asyncio.sleep(1)


def _pg_conninfo() -> str:
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    parts = []
    for key in ("dbname", "user", "password", "host", "port"):
        value = params.get(key)
        if value:
            escaped = str(value).replace("\\", "\\\\").replace("'", "\\'")
            parts.append(f"{key}='{escaped}'")
    return " ".join(parts)


listener = _PgListener()


async def wait_for_job(owner_id: int, timeout: float) -> bool:
    """Wait until a job may be claimable for this owner, or `timeout` seconds pass."""
    listener.ensure_started()
    with hub.waiting(owner_id) as event:
        try:
            await asyncio.wait_for(event.wait(), timeout)
            return True
        except TimeoutError:
            return False


def recheck_interval() -> float:
    return max(0.05, float(settings.EVERDICT_WAKE_RECHECK_S))
