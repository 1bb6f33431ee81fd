"""Plan limits are not failures: a rate-limited case is handed back and the runner pauses.

A harness declares how its tool says "rate limited" (`retry_on`: exit codes, or a stderr line
matching an RE2 pattern). The wait comes from a `retry_after_s` field of the case's JSON
output, else the pattern's named group `retry_after` (seconds), else `DEFAULT_RETRY_AFTER_S`.
The runner hands the case back with `release_job(..., paused_until=…)` — no attempt spent —
and leases nothing until then, saying so ("paused: rate-limited until 15:04").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import re2

from runnercli.case.delivery.reports import Delivery
from runnercli.case.log import CaseLog
from runnercli.client import RunnerError
from runnercli.console.status import shorten
from runnercli.protocol import CaseResult, RetryOn
from runnercli.session import JobRun, Session

# A tool that says it is rate limited without saying for how long: try again in five
# minutes (a plan's window is minutes to hours; a minute would mostly be refused again).
DEFAULT_RETRY_AFTER_S = 300.0
MIN_RETRY_AFTER_S = 1.0
MAX_RETRY_AFTER_S = 24 * 3600.0
# While paused, the runner tells the server its status this often (the roster stays true).
PAUSE_BEAT_S = 30.0


@dataclass(frozen=True)
class RateLimited:
    wait_s: float
    why: str


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> Any:
    """The pattern compiled by RE2 (linear time), or None if RE2 cannot run it."""
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error:
        return None


def _seconds(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    if seconds != seconds:  # NaN
        return None
    return min(max(seconds, MIN_RETRY_AFTER_S), MAX_RETRY_AFTER_S)


def _stated_wait(output: str) -> float | None:
    try:
        parsed = json.loads(output)
    except ValueError:
        return None
    return _seconds(parsed.get("retry_after_s")) if isinstance(parsed, dict) else None


def rate_limited(retry_on: RetryOn | None, result: CaseResult) -> RateLimited | None:
    """Whether the case's tool said it was rate limited, and how long to wait."""
    if retry_on is None or result.status != "completed":
        return None
    why, group_wait = None, None
    if result.exit_code is not None and result.exit_code in retry_on.exit_codes:
        why = f"exit code {result.exit_code}"
    pattern = _compiled(retry_on.stderr_regex) if retry_on.stderr_regex else None
    if pattern is not None:
        for line in reversed(result.stderr_tail.splitlines()):
            match = pattern.search(line)
            if match is not None:
                why = why or f"stderr: {shorten(line, 200)}"
                found = match.groupdict().get("retry_after")
                group_wait = _seconds(found) if found is not None else None
                break
    if why is None:
        return None
    wait = _stated_wait(result.output) or group_wait or DEFAULT_RETRY_AFTER_S
    return RateLimited(wait_s=wait, why=why)


def clock(at: float) -> str:
    """`15:04`, local time (with the date when it is not today)."""
    moment = datetime.fromtimestamp(at)
    if moment.date() != datetime.now().date():
        return moment.strftime("%Y-%m-%d %H:%M")
    return moment.strftime("%H:%M")


class Pauses:
    """Hand a rate-limited case back and lease nothing until its wait is over."""

    def __init__(self, session: Session, delivery: Delivery) -> None:
        self.session = session
        self.delivery = delivery
        # Leasing waits until then (epoch seconds), and the status line says why.
        self.paused_until: float | None = None
        self.reason = ""

    def text(self) -> str:
        if self.paused_until is None or time.time() >= self.paused_until:
            return ""
        return f"paused: {self.reason} until {clock(self.paused_until)}"

    async def release_rate_limited(
        self, job_run: JobRun, limit: RateLimited, *, log: CaseLog | None = None
    ) -> bool:
        """Hand the job back without spending an attempt, and pause this runner; its `log`
        says why, and closes."""
        until = time.time() + limit.wait_s
        paused_until = datetime.fromtimestamp(until, UTC).isoformat()
        reason = f"rate-limited ({limit.why})"
        self._pause_leasing(until, "rate-limited")
        line = f"⏸ rate-limited ({limit.why}): handed back; this runner pauses until {clock(until)}"
        if log is not None:
            log.add(line)
            await log.close()
        self.session.status.result(f"{job_run.title}: {line}")
        return await self.delivery.release(
            job_run.job.job_id,
            job_run.epoch,
            reason,
            title=job_run.title,
            paused_until=paused_until,
        )

    def _pause_leasing(self, until: float, reason: str) -> None:
        if self.paused_until is None or until > self.paused_until:
            self.paused_until, self.reason = until, reason
        self.session.show()

    async def wait_while_paused(self) -> None:
        """Lease nothing while paused; keep the server's roster told why."""
        while self.paused_until is not None and not self.session.stop.is_set():
            remaining = self.paused_until - time.time()
            if remaining <= 0:
                break
            self.session.show()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.session.stop.wait(), min(remaining, PAUSE_BEAT_S))
            with contextlib.suppress(RunnerError):  # the next lease call says what is wrong
                await self.session.client.hello(
                    capabilities=self.session.options.capabilities,
                    status=self.session.status_text(),
                )
        self.paused_until = None
        self.session.show()
