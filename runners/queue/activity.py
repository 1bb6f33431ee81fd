"""Runner activity, and the idle timeout that runs off it (not off queue age).

A runner is *active* while it holds an unexpired lease, while it is paused by a plan limit
(and for the timeout after its pause ends, as if seen then), while it holds a lapsed lease
it may still resume (within the resume window), or when it was seen — lease, heartbeat,
long-poll, hello — within EVERDICT_QUEUE_IDLE_TIMEOUT_S, unless it said it pauses of its
own accord (`hello`'s `paused_reason`, "on battery"): then it is offline-equivalent once it
holds nothing. A queued job is *idle* once it has
waited longer than that timeout and no runner that could take it — its pinned runner, or
for `self:any` any of the owner's runners with its capabilities — is active: so a busy
runner protects every job queued behind it, in any run and any workspace.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import BooleanField, Exists, F, Func, OuterRef, Q, QuerySet
from django.utils import timezone

from runners.models import JobStatus, Runner, RunnerJob
from runners.queue.rows import resume_window


class Covers(Func):
    """`have` (a JSON list) holds every element of `need` (a JSON list): jsonb containment on
    PostgreSQL, `json_each` on SQLite."""

    output_field = BooleanField()
    arity = 2

    def as_sql(  # type: ignore[override]
        self, compiler: Any, connection: Any, **extra_context: Any
    ) -> tuple[str, list[Any]]:
        have, need = self.source_expressions
        have_sql, have_params = compiler.compile(have)
        need_sql, need_params = compiler.compile(need)
        if connection.vendor == "postgresql":
            return f"({have_sql})::jsonb @> ({need_sql})::jsonb", [*have_params, *need_params]
        return (
            f"NOT EXISTS (SELECT 1 FROM json_each({need_sql}) AS need"
            f" WHERE need.value NOT IN (SELECT have.value FROM json_each({have_sql}) AS have))",
            [*need_params, *have_params],
        )


def idle_timeout() -> timedelta:
    return timedelta(seconds=settings.EVERDICT_QUEUE_IDLE_TIMEOUT_S)


def _holds_lease(now: datetime) -> Exists:
    """The runner holds an unexpired lease, or one that lapsed within the resume window (one
    condition: an unexpired lease ends later than that)."""
    return Exists(
        RunnerJob.objects.filter(
            leased_by=OuterRef("pk"),
            status__in=(JobStatus.LEASED, JobStatus.QUEUED),
            leased_until__gte=now - resume_window(),
        )
    )


def runners_active(now: datetime | None = None) -> QuerySet[Runner]:
    """The runners active now (see the module's docstring)."""
    now = now or timezone.now()
    cutoff = now - idle_timeout()
    return Runner.objects.filter(revoked_at__isnull=True).filter(
        # Seen, unless it said it leases nothing (on battery): then only while it holds work.
        Q(last_seen_at__gte=cutoff, paused_reason="")
        | Q(paused_until__gte=cutoff)
        | Q(_holds_lease(now))
    )


def jobs_idle(now: datetime | None = None) -> QuerySet[RunnerJob]:
    """Queued jobs that waited longer than the idle timeout with no runner active that could
    take them."""
    now = now or timezone.now()
    active = (
        runners_active(now)
        .filter(owner_id=OuterRef("owner_id"))
        .filter(Covers(F("capabilities"), OuterRef("required_capabilities")))
        .filter(Covers(F("features"), OuterRef("needs_features")))
    )
    pinned_active = Exists(active.filter(pk=OuterRef("runner_id")))
    any_active = Exists(active)
    return RunnerJob.objects.filter(
        status=JobStatus.QUEUED, queued_at__lt=now - idle_timeout()
    ).exclude(
        (Q(runner__isnull=False) & Q(pinned_active)) | (Q(runner__isnull=True) & Q(any_active))
    )


def _clock(moment: datetime | None) -> str:
    return timezone.localtime(moment).strftime("%H:%M") if moment else "never"


def _paused_words(reason: str) -> str:
    return "laptop is on battery" if reason == "on battery" else reason


def absence(
    runner: Runner, needed: list[str], now: datetime | None = None, features: Sequence[str] = ()
) -> str:
    """Why this runner did not take a job needing `needed` (and runner `features`): offline,
    asleep (a lease it may resume lapsed), paused, revoked, lacking capabilities, or too old
    for what the job uses."""
    now = now or timezone.now()
    if runner.revoked_at is not None:
        return "revoked"
    missing = sorted(set(needed) - set(runner.capabilities or []))
    if missing:
        return f"{'online' if runner.is_online else 'offline'} but lacks {', '.join(missing)}"
    outdated = sorted(set(features) - set(runner.features or []))
    if outdated:
        state = "online" if runner.is_online else "offline"
        return f"{state} but cannot run {', '.join(outdated)}: update the runner"
    lapsed = (
        RunnerJob.objects.filter(leased_by=runner, status=JobStatus.QUEUED)
        .exclude(leased_until=None)
        .order_by("-leased_until")
        .first()
    )
    seen = f"last seen {_clock(runner.last_seen_at)}"
    lapsed_at = lapsed.leased_until if lapsed is not None else None
    if lapsed is not None and lapsed_at is not None and lapsed_at >= (runner.last_seen_at or now):
        return (
            f"asleep: its lease of case {lapsed.case_key} lapsed at "
            f"{_clock(lapsed_at)} and was not resumed ({seen})"
        )
    if runner.paused_until is not None and runner.paused_until >= (runner.last_seen_at or now):
        why = f": {runner.pause_reason}" if runner.pause_reason else ""
        return f"paused{why} until {_clock(runner.paused_until)}, not seen since"
    if runner.paused_reason:
        return f"paused: {_paused_words(runner.paused_reason)}, leasing nothing ({seen})"
    if runner.last_seen_at is None or runner.last_seen_at < now - idle_timeout():
        return f"offline ({seen})"
    return f"online but did not take it ({seen})"
