"""Runner presence and the short self-reported status line (cache, not database)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from datetime import timedelta

from channels.db import database_sync_to_async
from django.conf import settings
from django.core.cache import cache
from django.db.models import Q
from django.utils import timezone

from runnercli.protocol import MAX_STATUS_CHARS
from runners.lookups import by_ids
from runners.models import Runner

log = logging.getLogger(__name__)

# How often a server process writes the presence refreshes it collected, in one UPDATE.
PRESENCE_FLUSH_S = 1.0
# Runners whose last status line a process remembers (beyond it, lines are written again).
MAX_REMEMBERED_STATUSES = 200_000


class PresenceWriter:
    """Presence refreshes of online runners, collected in memory and written together.

    A runner coming (back) online is written at once, so it shows online at once; keeping
    an online runner fresh joins the process's next write — one statement per second
    however many runners are polling. Without a running writer (a command, a test, a
    sync caller), refreshes are written at once.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # Held across each write of status lines to the cache (never in the event loop): a
        # line kept alive is written only while it is still the runner's newest.
        self._write_lock = threading.Lock()
        self._due: set[int] = set()
        # Status lines to write again unchanged (to keep them from expiring), with the last
        # line written for each runner and when: runner id -> (status, monotonic time).
        self._statuses_due: dict[int, str] = {}
        self._written: dict[int, tuple[str, float]] = {}
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def ensure_started(self) -> None:
        loop = asyncio.get_running_loop()
        if self._task is not None and not self._task.done() and self._loop is loop:
            return
        self._loop = loop
        self._task = loop.create_task(self._run(), name="presence-writer")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def refresh(self, runner_id: int) -> bool:
        """Queue a refresh for the next write; False when no writer runs in this process."""
        if not self.running:
            return False
        with self._lock:
            self._due.add(runner_id)
        return True

    def keep_status(self, runner_id: int, status: str) -> bool:
        """Keep this status line alive from the next write, if it is the line last written
        for this runner; False when it must be written now (changed, or no writer runs).

        What was written last is known per process: a runner whose calls alternate between
        replicas may show the line another replica wrote for up to half its lifetime."""
        if not self.running:
            return False
        now = time.monotonic()
        with self._lock:
            last = self._written.get(runner_id)
            if last is None or last[0] != status:
                return False
            # Written again once half its lifetime has passed: a runner polling at least
            # every EVERDICT_STATUS_TTL_S / 2 never sees its line expire.
            if now - last[1] >= settings.EVERDICT_STATUS_TTL_S / 2:
                self._statuses_due[runner_id] = status
                self._written[runner_id] = (status, now)
        return True

    def write_status(self, runner_id: int, status: str) -> None:
        """Write this runner's status line now, and remember it, so repeating it costs
        nothing; a keep-alive of an older line queued meanwhile is dropped."""
        with self._write_lock:
            with self._lock:
                if len(self._written) >= MAX_REMEMBERED_STATUSES:
                    self._written.clear()
                self._written[runner_id] = (status, time.monotonic())
                self._statuses_due.pop(runner_id, None)
            cache.set(_status_key(runner_id), status, settings.EVERDICT_STATUS_TTL_S)

    def flush(self) -> int:
        """Write the collected refreshes now; returns how many runners were written."""
        with self._lock:
            due, self._due = self._due, set()
            statuses, self._statuses_due = self._statuses_due, {}
        if due:
            now = timezone.now()
            for chunk in by_ids(Runner.objects.all(), "pk", due):
                chunk.update(last_seen_at=now)
        if statuses:
            with self._write_lock:
                # A line written since it was queued is newer: it stays.
                with self._lock:
                    newest = {
                        pk: line
                        for pk, line in statuses.items()
                        if (last := self._written.get(pk)) is not None and last[0] == line
                    }
                cache.set_many(
                    {_status_key(pk): line for pk, line in newest.items()},
                    settings.EVERDICT_STATUS_TTL_S,
                )
        return len(due)

    async def _run(self) -> None:
        from runners.wakeup import housekeeping_executor

        write = database_sync_to_async(
            self.flush, thread_sensitive=False, executor=housekeeping_executor()
        )
        while True:
            await asyncio.sleep(PRESENCE_FLUSH_S)
            try:
                await write()
            except Exception:
                log.warning("presence write failed; retrying with the next batch", exc_info=True)


presence_writer = PresenceWriter()


def _status_key(runner_id: int) -> str:
    return f"everdict:runner-status:{runner_id}"


def runner_touch(*, runner: Runner, status: str | None = None) -> None:
    """Mark the runner seen and keep its status line.

    The row is refreshed at most every EVERDICT_PRESENCE_WRITE_S, and refreshes of online
    runners are batched by the process's presence writer, so thousands of idle long-polling
    runners do not turn presence into a write load on the database; an unchanged status
    line is likewise only kept alive, in the writer's batch.
    """
    if runner_touch_deferred(runner=runner, status=status):
        return
    now = timezone.now()
    stale_before = now - timedelta(seconds=settings.EVERDICT_PRESENCE_WRITE_S)
    if runner.last_seen_at is None or runner.last_seen_at < stale_before:
        if not (runner.is_online and presence_writer.refresh(runner.pk)):
            Runner.objects.filter(pk=runner.pk).filter(
                Q(last_seen_at__isnull=True) | Q(last_seen_at__lt=stale_before)
            ).update(last_seen_at=now)
        runner.last_seen_at = now
    if status:
        presence_writer.write_status(runner.pk, status[:MAX_STATUS_CHARS])


def runner_touch_deferred(*, runner: Runner, status: str | None = None) -> bool:
    """Do `runner_touch` in memory, for the process's presence writer to write, when it
    needs no write of its own now: an online runner with its status line unchanged. Safe in
    the event loop (no I/O); False when `runner_touch` must do it (in a thread)."""
    if not presence_writer.running:
        return False
    line = status[:MAX_STATUS_CHARS] if status else ""
    now = timezone.now()
    stale_before = now - timedelta(seconds=settings.EVERDICT_PRESENCE_WRITE_S)
    stale = runner.last_seen_at is None or runner.last_seen_at < stale_before
    if stale and not runner.is_online:
        return False  # coming (back) online: written at once, so it shows at once
    if line and not presence_writer.keep_status(runner.pk, line):
        return False
    if stale:
        presence_writer.refresh(runner.pk)
        runner.last_seen_at = now
    return True


def runner_statuses(runner_ids: list[int]) -> dict[int, str]:
    """Return the live status lines of these runners (absent when silent for ~2 min)."""
    found = cache.get_many([_status_key(pk) for pk in runner_ids])
    return {pk: found[_status_key(pk)] for pk in runner_ids if _status_key(pk) in found}


def status_severity(status: str) -> str:
    """Classify a status line for colouring: ok, busy, warning or error."""
    lowered = status.lower()
    if any(word in lowered for word in ("failed", "error", "cannot", "revoked", "unreachable")):
        return "error"
    warnings = ("retry", "backoff", "update", "refused", "draining", "waiting for consent")
    if any(word in lowered for word in warnings):
        return "warning"
    if lowered.startswith("running"):
        return "busy"
    return "ok"
