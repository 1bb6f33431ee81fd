"""One leased job as the runner holds it: its lease, its log, and what happened to it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from runnercli.protocol import CaseJob, Lease

if TYPE_CHECKING:
    from runnercli.caselog import CaseLog


@dataclass
class JobRun:
    job: CaseJob
    # The lease it runs under; a new grant of the same job (leased again while this runner
    # slept) replaces it, and every later call carries the new fence.
    lease: Lease
    kill: asyncio.Event = field(default_factory=asyncio.Event)
    # Set when the server took the job back (canceled, lease lost): nothing more is reported.
    lost_reason: str | None = None
    canceled: bool = False
    # Set on the second signal: the case is killed and handed back for another attempt.
    abandoned: bool = False
    # The case is over; its report is on its way (the lease is still heartbeaten until the
    # server acknowledges it).
    finished: bool = False
    # It counts against `--max-concurrent` until its case is over (not until its report is
    # acknowledged: the slot takes the next case while the result is on its way).
    holds_slot: bool = False
    # How many slots its case takes (its harness's `slots`, within `--max-concurrent`), and
    # whether its case has started in them (a case leased beside a big one waits for room).
    slots: int = 1
    started: bool = False
    log: CaseLog | None = None
    # A heartbeat took its lapsed lease back since the last wake-up round.
    resumed: bool = False
    # One heartbeat of the job at a time: two crossing on a lapsed lease would race to take
    # it back, and the loser would read as a lease lost.
    beating: asyncio.Lock = field(default_factory=asyncio.Lock)
    # The case's working directory while its files may be read on request (the `Files`
    # stage sets it, and clears it before the directory goes).
    workdir: Path | None = None

    @property
    def title(self) -> str:
        job = self.job
        return f"run {job.run_id} case {job.case.key}"

    @property
    def epoch(self) -> int:
        return self.lease.lease_epoch
