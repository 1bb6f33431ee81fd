"""Wake-ups for parked long-polls: a job became claimable for an owner.

A dispatch, requeue or admission calls `notify_owners()` inside its transaction. On
PostgreSQL that issues `pg_notify`, which the server delivers only if and when the
transaction commits, to every process (every replica) listening; each process also
wakes its own waiters right after commit.

A lost notification (a listener reconnecting, a requeue by a scheduler process on
SQLite) costs latency, never a job: one re-check task per process asks, every
EVERDICT_WAKE_RECHECK_S, which of the owners with parked long-polls have queued jobs —
one query however many are parked — and wakes only those. Idle waiters cost nothing
between wake-ups.

A running case's file request wakes polls of its own kind: `fs_hub`, keyed by the runner
that holds the lease (`notify_fs_runners`, channel `everdict_fs`), so a dispatch never wakes
a parked `poll_case_fs_requests` and a page's request wakes no `lease_job`. The runner's
answer wakes the page's request waiting for it (`answers`, keyed by request id, channel
`everdict_fs_answer`): it reads the row at once rather than at its next look.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Protocol, TypeVar

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import connection, transaction

from accounts import kept
from runners import metrics, revocations
from runners.lookups import by_ids

log = logging.getLogger(__name__)

CHANNEL = "everdict_jobs"
FS_CHANNEL = "everdict_fs"
FS_ANSWER_CHANNEL = "everdict_fs_answer"


class _Waiter:
    """One parked long-poll: a future woken by a dispatch or expired by one timer on the
    event loop's heap — no task and no event of its own, however many are parked."""

    __slots__ = ("future", "loop", "waiting")

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[bool] = self.loop.create_future()
        # True while its poll waits: its look found nothing, only a wake-up reaches it now.
        self.waiting = False

    def wake(self) -> None:
        self.loop.call_soon_threadsafe(self._settle, True)

    def _settle(self, woken: bool) -> None:
        if not self.future.done():
            self.future.set_result(woken)

    async def wait(self, timeout: float) -> bool:
        """Wait until woken (True) or `timeout` seconds have passed (False)."""
        if self.future.done():
            return self.future.result()
        timer = self.loop.call_later(max(0.0, timeout), self._settle, False)
        self.waiting = True
        try:
            return await self.future
        finally:
            self.waiting = False
            timer.cancel()


class WakeHub:
    """Process-local registry of parked long-polls, keyed by owner id.

    It also remembers which owners the last re-check found with no queued job at all, until
    a wake-up for them (or any wake-up while that re-check ran) says otherwise: a new poll
    of such an owner's runner parks without a claim of its own, so idle runners cost the
    database nothing but the process's one re-check.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[int, set[_Waiter]] = defaultdict(set)
        self._wakes = 0
        self._empty: dict[int, float] = {}  # owner -> when a re-check found no queued job

    @contextmanager
    def waiting(self, owner_id: int) -> Iterator[_Waiter]:
        # Registered before the caller checks the queue, so a dispatch committing between
        # that check and the wait still wakes it.
        waiter = _Waiter()
        with self._lock:
            self._waiters[owner_id].add(waiter)
        try:
            yield waiter
        finally:
            with self._lock:
                bucket = self._waiters.get(owner_id)
                if bucket is not None:
                    bucket.discard(waiter)
                    if not bucket:
                        del self._waiters[owner_id]

    def wake(self, owner_ids: Iterable[int]) -> None:
        owners = set(owner_ids)
        with self._lock:
            self._wakes += 1
            for owner_id in owners:
                self._empty.pop(owner_id, None)
            targets = [w for oid in owners for w in self._waiters.get(oid, ())]
        for waiter in targets:
            try:
                waiter.wake()
            except RuntimeError:  # its loop has closed
                pass

    def parked(self) -> int:
        with self._lock:
            return sum(len(bucket) for bucket in self._waiters.values())

    def waiting_now(self) -> int:
        """The parked polls past their look (a claim, a take of fs requests) that found
        nothing: only a wake-up, or their deadline, moves them now."""
        with self._lock:
            return sum(waiter.waiting for bucket in self._waiters.values() for waiter in bucket)

    def owners(self) -> list[int]:
        """The owners that have parked long-polls now."""
        with self._lock:
            return list(self._waiters)

    def wake_count(self) -> int:
        with self._lock:
            return self._wakes

    def found_empty(self, owner_ids: Iterable[int], *, since: int, at: float) -> None:
        """Remember these owners had no queued job when a re-check began at `at` — unless
        a wake-up came after it began (`since`, the wake count then)."""
        fresh_after = time.monotonic() - _EMPTY_FOR * recheck_interval()
        with self._lock:
            self._empty = {o: t for o, t in self._empty.items() if t >= fresh_after}
            if self._wakes == since:
                self._empty.update(dict.fromkeys(owner_ids, at))

    def known_empty(self, owner_id: int) -> bool:
        """Whether a recent re-check found this owner with no queued job, and nothing since
        said a job may have come."""
        with self._lock:
            at = self._empty.get(owner_id)
        return at is not None and time.monotonic() - at <= _EMPTY_FOR * recheck_interval()

    def forget_empty(self) -> None:
        """Wake-ups may have been missed: what the re-checks found no longer holds."""
        with self._lock:
            self._wakes += 1
            self._empty.clear()


# How many re-check intervals an owner found with no queued job is trusted to stay so
# (a job queued without a wake-up reaching this process is found by the next re-check).
_EMPTY_FOR = 2


hub = WakeHub()
# Parked `poll_case_fs_requests`, keyed by runner id (not by owner).
fs_hub = WakeHub()


class Settable(Protocol):
    def set(self) -> None: ...


E = TypeVar("E", bound=Settable)


class AnswerWaits:
    """Page requests waiting for a runner's answer, keyed by request id: each on a
    `threading.Event` in its thread, or on an event of its own (one an event loop awaits).

    An answer given in the process where its request waits is handed to it here (`hand`),
    so the waiting side need not read it back from the database."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._events: dict[int, Settable] = {}
        self._handed: dict[int, object] = {}
        # Requests whose row an answer to be handed over is deleting right now.
        self._handing: set[int] = set()

    @contextmanager
    def waiting(self, request_id: int, answered: E) -> Iterator[E]:
        # Registered before the first read: an answer committed after it sets the event.
        with self._lock:
            self._events[request_id] = answered
        try:
            yield answered
        finally:
            with self._lock:
                self._events.pop(request_id, None)
                self._handed.pop(request_id, None)

    def waits_here(self, request_id: int) -> bool:
        with self._lock:
            return request_id in self._events

    @contextmanager
    def handing(self, request_id: int) -> Iterator[None]:
        """Around the write of an answer to be handed over (which deletes the request's row,
        then hands it): meanwhile the waiting side, finding the row gone, waits on."""
        with self._lock:
            self._handing.add(request_id)
        try:
            yield
        finally:
            with self._lock:
                self._handing.discard(request_id)

    def hand(self, request_id: int, answer: object) -> bool:
        """Give the request waiting here its answer and wake it; False when none waits."""
        with self._lock:
            answered = self._events.get(request_id)
            if answered is not None:
                self._handed[request_id] = answer
        if answered is None:
            return False
        answered.set()
        return True

    def handed(self, request_id: int) -> object | None:
        """The answer handed to this request, taken (None when none was)."""
        with self._lock:
            return self._handed.pop(request_id, None)

    def coming(self, request_id: int) -> bool:
        """Whether an answer is being handed to this request, or was and is not taken yet."""
        with self._lock:
            return request_id in self._handing or request_id in self._handed

    def wake(self, request_ids: Iterable[int]) -> None:
        with self._lock:
            events = [self._events.get(pk) for pk in request_ids]
        for answered in events:
            if answered is not None:
                answered.set()


answers = AnswerWaits()


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


def notify_fs_runners(runner_ids: Iterable[int]) -> None:
    """Announce, as part of the current transaction, file requests for these runners."""
    runners = sorted(set(runner_ids))
    if not runners:
        return
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for runner_id in runners:
                cursor.execute("SELECT pg_notify(%s, %s)", [FS_CHANNEL, str(runner_id)])
    transaction.on_commit(lambda: fs_hub.wake(runners))


def notify_fs_answered(request_id: int) -> None:
    """Announce, as part of the current transaction, the runner's answer to a file request."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [FS_ANSWER_CHANNEL, str(request_id)])
    transaction.on_commit(lambda: answers.wake([request_id]))


class _PgListener:
    """One LISTEN connection per process that relays notifications: job and file-request
    wake-ups to the local hubs, revocations to the revocation hooks, changes to users and
    their API keys to the kept keys."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        # True while LISTEN is in effect: no notification addressed to us is being missed.
        self.listening = False

    def ensure_started(self) -> None:
        loop = asyncio.get_running_loop()
        # Checked first: called on every runner call, and reading `connection` from the
        # event loop goes through a context-local lookup.
        if self._task is not None and not self._task.done() and self._loop is loop:
            return
        if connection.vendor != "postgresql":
            return
        self._loop = loop
        self._task = loop.create_task(self._listen_forever())

    async def _listen_forever(self) -> None:
        import psycopg

        connected_before = False
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(
                    _pg_conninfo(), autocommit=True
                ) as conn:
                    await conn.execute(f"LISTEN {CHANNEL}")
                    await conn.execute(f"LISTEN {FS_CHANNEL}")
                    await conn.execute(f"LISTEN {FS_ANSWER_CHANNEL}")
                    await conn.execute(f"LISTEN {revocations.CHANNEL}")
                    await conn.execute(f"LISTEN {kept.CHANNEL}")
                    self.listening = True
                    if connected_before:
                        # Whatever was announced while we were away is found at once.
                        rechecker.poke()
                        fs_hub.wake(fs_hub.owners())
                    connected_before = True
                    async for note in conn.notifies():
                        try:
                            subject = int(note.payload)
                        except ValueError:
                            continue
                        if note.channel == revocations.CHANNEL:
                            revocations.relay(subject)
                        elif note.channel == kept.CHANNEL:
                            kept.relay(subject)
                        elif note.channel == FS_CHANNEL:
                            fs_hub.wake([subject])
                        elif note.channel == FS_ANSWER_CHANNEL:
                            answers.wake([subject])
                        else:
                            hub.wake([subject])
            except asyncio.CancelledError:
                raise
            except Exception:
                # Waiters fall back to their periodic re-check meanwhile.
                log.warning("job notification listener lost; reconnecting", exc_info=True)
                await asyncio.sleep(1)
            finally:
                if self.listening:
                    self.listening = False
                    hub.forget_empty()
                    revocations.relay(None)
                    kept.relay(None)


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


def owners_with_queued_jobs(owner_ids: list[int]) -> set[int]:
    """Which of these owners have a claimable queued job (through the claim's partial index):
    a lapsed lease out of attempts is its holder's alone to resume, and wakes nobody."""
    from django.db.models import F, Q

    from runners.models import JobStatus, RunnerJob

    claimable = Q(attempts__lt=F("max_attempts")) | Q(leased_by__isnull=True)
    queued = RunnerJob.objects.filter(claimable, status=JobStatus.QUEUED)
    found: set[int] = set()
    for chunk in by_ids(queued, "owner_id", owner_ids):
        found.update(chunk.values_list("owner_id", flat=True).distinct())
    return found


class _Rechecker:
    """The process's one periodic re-check of the owners with parked long-polls."""

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._poked: asyncio.Event | None = None

    def ensure_started(self) -> None:
        loop = asyncio.get_running_loop()
        if self._task is not None and not self._task.done() and self._loop is loop:
            return
        self._loop = loop
        self._poked = asyncio.Event()
        self._task = loop.create_task(self._run())

    def poke(self) -> None:
        """Re-check now rather than at the next interval (on this task's loop)."""
        if self._poked is not None:
            self._poked.set()

    async def _run(self) -> None:
        assert self._poked is not None
        poked = self._poked
        # A thread of its own: the re-check must not wait behind a backlog of claims.
        check = database_sync_to_async(_recheck, thread_sensitive=False, executor=_HOUSEKEEPING)
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(recheck_interval()):
                    await poked.wait()
            poked.clear()
            owners = hub.owners()
            if not owners:
                continue
            metrics.RECHECKS.inc()
            try:
                found = await check(owners)
            except Exception:
                log.warning("re-check of parked long-polls failed", exc_info=True)
                continue
            if found:
                hub.wake(found)


# The process's background database work (re-checks, presence writes), off the pool that
# serves runners' calls.
_HOUSEKEEPING = ThreadPoolExecutor(max_workers=1, thread_name_prefix="everdict-housekeeping")


def housekeeping_executor() -> ThreadPoolExecutor:
    return _HOUSEKEEPING


def _recheck(owners: list[int]) -> set[int]:
    """Which of these owners have queued jobs; remember the others as having none."""
    since, began = hub.wake_count(), time.monotonic()
    found = owners_with_queued_jobs(owners)
    hub.found_empty(set(owners) - found, since=since, at=began)
    return found


rechecker = _Rechecker()


def ensure_started() -> None:
    """Start this process's listener (PostgreSQL) and re-check task, once per event loop."""
    listener.ensure_started()
    rechecker.ensure_started()


def recheck_interval() -> float:
    return max(0.05, float(settings.EVERDICT_WAKE_RECHECK_S))
