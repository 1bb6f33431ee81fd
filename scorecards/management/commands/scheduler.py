"""The worker loop: lease expiry (the job back in the queue, resumable by its holder), lapsed
last attempts past the resume window, revoked runners, idle queues, run completion.

Shaped like a healthchecks worker: a signal sets a flag; each pass runs every step until it
reports nothing left (at most 500 items per step and pass, so no step starves the others);
sleeps happen in short slices; stale connections are closed between passes.

Each item is one transaction that locks the item's run first, then re-checks the item under
the lock. Several schedulers may run at once against PostgreSQL: a run whose row another
scheduler (or a settlement) holds is skipped with SKIP LOCKED, never waited for. An item
whose handling raises is rolled back alone, logged, and set aside — on the job row:
`sweep_failures` counted, `sweep_error` kept, `sweep_held_until` pushed back (30 s, doubling,
at most an hour); `everdict_sweep_failures` counts it — and the step goes on with the next
item in the same pass. A database error (unavailable, locked) ends the step's pass instead:
it is the database's trouble, not the row's, and the next pass tries again.
"""

from __future__ import annotations

import logging
import signal
import time
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.db import close_old_connections

from scorecards.services import SCHEDULER_STEPS

log = logging.getLogger("everdict.scheduler")

# One pass handles at most this many items per step, so no step starves the others.
_MAX_ITEMS_PER_STEP = 500


def process_pass() -> int:
    """Run every step until it reports nothing to do; return how many items were handled."""
    handled = 0
    for step in SCHEDULER_STEPS:
        for _ in range(_MAX_ITEMS_PER_STEP):
            try:
                if not step():
                    break
            except Exception:
                # Only the database's own trouble gets here (a row that raises is set aside
                # by its step): try again next pass.
                log.exception("scheduler step %s failed", step.__name__)
                break
            handled += 1
    return handled


class Command(BaseCommand):
    help = (
        "Run the scheduler loop (lease expiry, lapsed leases, revoked runners, idle queues, "
        "run completion)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="Run one pass and exit.")
        parser.add_argument(
            "--interval", type=float, default=1.0, help="Seconds between passes (default 1)."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["once"]:
            handled = process_pass()
            self.stdout.write(f"handled {handled} items")
            return
        self.stopping = False

        def stop(signum: int, frame: FrameType | None) -> None:
            self.stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        interval = max(0.05, options["interval"])
        self.stdout.write(f"scheduler started (every {interval}s)")
        while not self.stopping:
            close_old_connections()
            if process_pass():
                continue
            deadline = time.monotonic() + interval
            while not self.stopping and time.monotonic() < deadline:
                time.sleep(min(0.2, interval))
        self.stdout.write("scheduler stopped")
