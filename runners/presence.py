"""Runner presence and the short self-reported status line (cache, not database)."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.core.cache import cache
from django.db.models import Q
from django.utils import timezone

from runnercli.protocol import MAX_STATUS_CHARS
from runners.models import Runner


def _status_key(runner_id: int) -> str:
    return f"everdict:runner-status:{runner_id}"


def runner_touch(*, runner: Runner, status: str | None = None) -> None:
    """Mark the runner seen and keep its status line.

    The row is written at most every EVERDICT_PRESENCE_WRITE_S, so thousands of idle
    long-polling runners do not turn presence into a write load on the database.
    """
    now = timezone.now()
    stale_before = now - timedelta(seconds=settings.EVERDICT_PRESENCE_WRITE_S)
    if runner.last_seen_at is None or runner.last_seen_at < stale_before:
        Runner.objects.filter(pk=runner.pk).filter(
            Q(last_seen_at__isnull=True) | Q(last_seen_at__lt=stale_before)
        ).update(last_seen_at=now)
        runner.last_seen_at = now
    if status:
        cache.set(_status_key(runner.pk), status[:MAX_STATUS_CHARS], settings.EVERDICT_STATUS_TTL_S)


def runner_statuses(runner_ids: list[int]) -> dict[int, str]:
    """Return the live status lines of these runners (absent when silent for ~2 min)."""
    found = cache.get_many([_status_key(pk) for pk in runner_ids])
    return {pk: found[_status_key(pk)] for pk in runner_ids if _status_key(pk) in found}


def status_severity(status: str) -> str:
    """Classify a status line for colouring: ok, busy, warning or error."""
    lowered = status.lower()
    if any(word in lowered for word in ("failed", "error", "cannot", "revoked", "unreachable")):
        return "error"
    if any(word in lowered for word in ("retry", "backoff", "update", "refused", "draining")):
        return "warning"
    if lowered.startswith("running"):
        return "busy"
    return "ok"
