"""Plan limits are not failures: a rate-limited case is handed back and the runner pauses.

A harness declares how its tool says "rate limited" (`retry_on`: exit codes, a stderr line or
a line of its output matching an RE2 pattern; an agent preset's names its CLI's plan-limit
message). The wait comes from a `retry_after_s` field of the case's JSON output, else the
pattern's named group `retry_after` (seconds) or `reset` (a clock time as the tool prints it:
"6:59pm", "Dec 6, 4:59pm", "6:56 PM", "Dec 6th, 2026 4:56 PM", in this machine's zone), else
`DEFAULT_RETRY_AFTER_S`. The runner hands the case back with `release_job(...,
paused_until=…)` — no attempt spent, never a `fail` — and leases nothing until then, saying
so ("paused: rate-limited until 15:04"; for an agent CLI's plan limit "paused until 15:00 —
Claude plan limit").
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import re2

from runnercli.case.delivery.reports import Delivery
from runnercli.case.log import CaseLog
from runnercli.client import RunnerError
from runnercli.console.status import shorten
from runnercli.protocol import CaseResult, RetryOn
from runnercli.protocol.agents import AGENT_CLIS
from runnercli.session import JobRun, Session
from runnercli.tasks import wait_event

# A tool that says it is rate limited without saying for how long: try again in five
# minutes (a plan's window is minutes to hours; a minute would mostly be refused again).
DEFAULT_RETRY_AFTER_S = 300.0
MIN_RETRY_AFTER_S = 1.0
MAX_RETRY_AFTER_S = 24 * 3600.0
# A plan's stated reset may be days ahead (a weekly limit); the server keeps a pause a week.
MAX_RESET_WAIT_S = 7 * 24 * 3600.0
# While paused, the runner tells the server its status this often (the roster stays true).
PAUSE_BEAT_S = 30.0


@dataclass(frozen=True)
class RateLimited:
    wait_s: float
    why: str
    # The agent CLI whose plan limit it was ("Claude", "Codex"), when its preset's pattern said.
    plan: str | None = None

    @property
    def reason(self) -> str:
        """Why the runner pauses, as the roster and the status line say it."""
        return f"{self.plan} plan limit" if self.plan else f"rate-limited ({self.why})"


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_RESET = re.compile(
    r"(?:(?P<month>[A-Za-z]{3}) (?P<day>\d{1,2})(?:st|nd|rd|th)?, (?:(?P<year>\d{4}) )?)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))? ?(?P<half>[ap]m)",
    re.IGNORECASE,
)


def reset_at(text: str, now: datetime | None = None) -> datetime | None:
    """When a printed reset time falls, in this machine's (naive, local) time: the next such
    clock time when no day is named; None when it is not one."""
    match = _RESET.fullmatch(text.strip())
    if match is None:
        return None
    hour, minute = int(match["hour"]), int(match["minute"] or 0)
    if not 1 <= hour <= 12 or minute > 59:
        return None
    hour = hour % 12 + (12 if match["half"].lower() == "pm" else 0)
    now = now or datetime.now()
    try:
        if match["month"] is None:
            at = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
            return at if at > now else at + timedelta(days=1)
        month = _MONTHS.index(match["month"].lower()) + 1
        year = int(match["year"] or now.year)
        at = datetime(year, month, int(match["day"]), hour, minute)
        if match["year"] is None and at < now - timedelta(days=1):
            at = at.replace(year=year + 1)  # "Jan 2" said on Dec 31
        return at
    except ValueError:  # no such month or day
        return None


def _reset_wait(found: str | None) -> float | None:
    at = reset_at(found) if found is not None else None
    if at is None:
        return None
    return min(max(at.timestamp() - time.time(), MIN_RETRY_AFTER_S), MAX_RESET_WAIT_S)


def _plan(pattern: str | None) -> str | None:
    """The agent CLI whose plan-limit pattern this is (its preset wrote it), if one."""
    for agent in AGENT_CLIS:
        if pattern == agent.plan_limit_regex:
            return agent.tool.capitalize()
    return None


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
    # An agent whose stream ended in its plan-limit message is an `error` case: handed back
    # all the same.
    if retry_on is None or result.status not in ("completed", "error"):
        return None
    why, group_wait, plan = None, None, None
    if result.exit_code is not None and result.exit_code in retry_on.exit_codes:
        why = f"exit code {result.exit_code}"
    for where, regex, text in (
        ("output", retry_on.output_regex, result.output),
        ("stderr", retry_on.stderr_regex, result.stderr_tail),
    ):
        pattern = _compiled(regex) if regex else None
        if pattern is None or group_wait is not None:
            continue
        for line in reversed(text.splitlines()):
            match = pattern.search(line)
            if match is not None:
                why = why or f"{where}: {shorten(line, 200)}"
                groups = match.groupdict()
                found = groups.get("retry_after")
                group_wait = (
                    _seconds(found) if found is not None else _reset_wait(groups.get("reset"))
                )
                plan = plan or (_plan(regex) if where == "output" else None)
                break
    if why is None:
        return None
    wait = _stated_wait(result.output) or group_wait or DEFAULT_RETRY_AFTER_S
    return RateLimited(wait_s=wait, why=why, plan=plan)


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
        if self.reason.endswith("plan limit"):
            return f"paused until {clock(self.paused_until)} — {self.reason}"
        return f"paused: {self.reason} until {clock(self.paused_until)}"

    async def release_rate_limited(
        self, job_run: JobRun, limit: RateLimited, *, log: CaseLog | None = None
    ) -> bool:
        """Hand the job back without spending an attempt, and pause this runner; its `log`
        says why, and closes."""
        until = time.time() + limit.wait_s
        paused_until = datetime.fromtimestamp(until, UTC).isoformat()
        reason = limit.reason
        self._pause_leasing(until, limit.reason if limit.plan else "rate-limited")
        line = f"⏸ {limit.reason}: handed back; this runner pauses until {clock(until)}"
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
            await wait_event(self.session.stop, min(remaining, PAUSE_BEAT_S))
            with contextlib.suppress(RunnerError):  # the next lease call says what is wrong
                await self.session.client.hello(
                    capabilities=self.session.options.capabilities,
                    status=self.session.status_text(),
                )
        self.paused_until = None
        self.session.show()
