"""What changed in a run since a watcher's last look: the live run page's deltas.

A watcher keeps three sequence numbers — the last log line, result and event it has — and
each pass reads only what came after them (through the (run, id) and (run, seq) indexes)
plus a few counts. A pass over a 10,000-case run with nothing new reads no result at all;
with one new result, it reads that one and the run's summary, never the run whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runners.models import JobStatus, RunnerJob
from scorecards import lifecycle
from scorecards.models import Run, RunEvent
from scorecards.replies.results import result_items
from scorecards.replies.runs import LogLine, RunSummary
from scorecards.selectors.results import results_after
from scorecards.selectors.runs import run_logs
from scorecards.selectors.summary import run_summary

if TYPE_CHECKING:
    from django.contrib.auth.models import User

# At most this many results or log lines per message; a watcher far behind gets several.
LIVE_BATCH = 200
LIVE_EVENTS = 50


@dataclass
class Watch:
    """Where a watcher is: the last log line, result and event it has, and the run's state
    (status, results, events, running jobs) when it was last sent the run."""

    logs_after: int = 0
    results_after: int = 0
    events_after: int = 0
    state: tuple[Any, ...] | None = field(default=None)
    # What each live part (the running cases' step and frame) last sent, by its name.
    parts: dict[str, lifecycle.Seen] = field(default_factory=dict)


def run_changes(*, user: User, run: Run, watch: Watch) -> tuple[list[dict[str, Any]], bool]:
    """The messages that bring the watcher up to date (advancing `watch`), and whether more
    are waiting (a batch was full)."""
    messages: list[dict[str, Any]] = []
    lines = [
        LogLine.of(row).data()
        for row in run_logs(user=user, run_id=run.pk, after=watch.logs_after, limit=LIVE_BATCH)
    ]
    if lines:
        watch.logs_after = lines[-1]["seq"]
        messages.append({"type": "logs", "lines": lines})
    rows, _ = results_after(run, after=watch.results_after, limit=LIVE_BATCH)
    items = result_items(rows)
    if items:
        watch.results_after = items[-1].seq
        messages.append(
            {"type": "results", "results": [i.data() for i in items], "last": watch.results_after}
        )
    events = list(
        RunEvent.objects.filter(run=run, pk__gt=watch.events_after).order_by("pk")[:LIVE_EVENTS]
    )
    if events:
        watch.events_after = events[-1].pk
    running = RunnerJob.objects.filter(run=run, status=JobStatus.LEASED).count()
    state = (run.status, watch.results_after, watch.events_after, running)
    if state != watch.state:
        watch.state = state
        messages.append(
            {
                "type": "run",
                "run": {
                    "id": run.pk,
                    "status": run.status,
                    "finished_at": run.finished_at.isoformat() if run.finished_at else None,
                    "summary": RunSummary.model_validate(run_summary(run)).data(),
                },
                "events": [
                    {"id": e.pk, "at": e.at.isoformat(), "level": e.level, "message": e.message}
                    for e in events
                ],
            }
        )
    for name, part in lifecycle.LIVE_PARTS.items():
        if (message := part(run, watch.parts.setdefault(name, {}))) is not None:
            messages.append(message)
    more = len(lines) == LIVE_BATCH or len(items) == LIVE_BATCH or len(events) == LIVE_EVENTS
    return messages, more
