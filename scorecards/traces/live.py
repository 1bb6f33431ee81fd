"""The run page's running cases, as deltas: what changed in each one's current step or newest
frame since the page's last look, and which stopped running.

The run's socket (`scorecards.live`) calls `running_changes` on each pass, as the live part
`running` of the run's lifecycle; a running case costs one trace row and a cache read, never
its events or its frame's bytes.
"""

from __future__ import annotations

from typing import Any

from scorecards.lifecycle import Seen, live_part
from scorecards.models import Run
from scorecards.traces.replies import RunningCaseItem
from scorecards.traces.selectors import running_cases


def _seen(item: RunningCaseItem) -> tuple[Any, ...]:
    step, frame = item.step, item.frame
    return (
        step.label if step else None,
        step.since if step else None,
        frame.n if frame else None,
    )


@live_part("running")
def running_changes(run: Run, seen: Seen) -> dict[str, Any] | None:
    """The `running` message bringing a watcher up to date (advancing `seen`: job id → what it
    was sent), or None when nothing changed."""
    items = [RunningCaseItem.of(run.pk, run.repeats, c) for c in running_cases(run)]
    changed = [item for item in items if seen.get(item.job) != _seen(item)]
    now = {item.job for item in items}
    gone = [job for job in seen if job not in now]
    for item in changed:
        seen[item.job] = _seen(item)
    for job in gone:
        del seen[job]
    if not changed and not gone:
        return None
    return {"type": "running", "cases": [item.data() for item in changed], "gone": gone}
