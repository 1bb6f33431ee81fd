"""A run's event log: what happened to it, in words, with a level."""

from __future__ import annotations

from scorecards.models import EventLevel, Run, RunEvent


def event(run: Run, message: str, level: str = EventLevel.INFO) -> RunEvent:
    """Record one event of a run (cut to the column's length)."""
    return RunEvent.objects.create(run=run, level=level, message=message[:1000])
