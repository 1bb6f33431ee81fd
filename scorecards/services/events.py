"""A run's event log: what happened to it, in words, with a level."""

from __future__ import annotations

from collections.abc import Sequence

from django.utils import timezone

from scorecards.models import TEXT_CHARS, EventLevel, Run, RunEvent


def event(run: Run, message: str, level: str = EventLevel.INFO) -> RunEvent:
    """Record one event of a run (cut to the column's length)."""
    return RunEvent.objects.create(run=run, level=level, message=message[:TEXT_CHARS])


def events_record(run: Run, said: Sequence[tuple[str, str]]) -> list[RunEvent]:
    """Record several events of a run at once, in order: (level, message) pairs."""
    now = timezone.now()
    return RunEvent.objects.bulk_create(
        [
            RunEvent(run=run, at=now, level=level, message=message[:TEXT_CHARS])
            for level, message in said
        ]
    )
