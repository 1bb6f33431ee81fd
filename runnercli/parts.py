"""What the parts of `RunnerLoop` share: one leased job's state, and the loop's own state.

`RunnerLoop` (in `runnercli.loop`) is assembled from parts, each in a module of its own:
one job's handling (`runnercli.job`), result delivery and the spool
(`runnercli.delivery`), heartbeats and waking from a sleep (`runnercli.sleep`), plan-limit
pauses (`runnercli.ratelimit`). Each part relies on what is declared here; the loop sets it up.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from runnercli.protocol import Ack, CaseJob, Lease

if TYPE_CHECKING:
    from runnercli.backoff import Backoff
    from runnercli.caselog import CaseLog
    from runnercli.client import RunnerClient
    from runnercli.consent import Consent
    from runnercli.exits import RunnerExit
    from runnercli.loop import RunOptions
    from runnercli.results import ResultSender
    from runnercli.spool import Spool
    from runnercli.status import StatusLine
    from runnercli.tools import ToolVersions


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
    log: CaseLog | None = None
    # A heartbeat took its lapsed lease back since the last wake-up round.
    resumed: bool = False
    # One heartbeat of the job at a time: two crossing on a lapsed lease would race to take
    # it back, and the loser would read as a lease lost.
    beating: asyncio.Lock = field(default_factory=asyncio.Lock)

    @property
    def title(self) -> str:
        job = self.job
        return f"run {job.run_id} case {job.case.key}"

    @property
    def epoch(self) -> int:
        return self.lease.lease_epoch


class RunnerParts(ABC):
    """The state and the few abilities every part of the loop relies on."""

    client: RunnerClient
    options: RunOptions
    status: StatusLine
    backoff: Backoff
    results: ResultSender
    spool: Spool | None
    running: dict[int, JobRun]
    last_failure: str | None
    consent: Consent
    tools: ToolVersions
    _stop: asyncio.Event
    _abort: asyncio.Event

    @abstractmethod
    def status_text(self) -> str:
        """Return the short status sent with each lease and heartbeat."""

    @abstractmethod
    def _show(self) -> None:
        """Show the current status on the status line."""

    @abstractmethod
    def _free_slot(self, job_run: JobRun) -> None:
        """The job's case is over: its slot may take the next case."""

    @abstractmethod
    def _die(self, exc: RunnerExit) -> None:
        """Stop the whole runner with `exc`."""

    @abstractmethod
    async def _pause(self, why: str, *, until: asyncio.Event | None = None) -> None:
        """Wait a backoff delay, cut short by `until`, saying why."""

    @abstractmethod
    async def _release(
        self,
        job_id: int,
        lease_epoch: int,
        reason: str,
        *,
        title: str,
        paused_until: str | None = None,
        patience_s: float = ...,
    ) -> bool:
        """Hand the job back without spending an attempt."""

    @abstractmethod
    async def _deliver(
        self, call: Callable[[], Awaitable[Ack]], *, title: str = "job", patience_s: float = ...
    ) -> bool:
        """Send a report until the server answers; return whether it accepted it."""
