"""What every part of a running runner shares: its session with the server and its state.

The parts (`runnercli.delivery`, `runnercli.heartbeats`, `runnercli.ratelimit`,
`runnercli.consent`, the case pipeline in `runnercli.case`) are objects built from one
`Session` and handed the other parts they need; `runnercli.loop` puts them together.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

from runnercli.backoff import Backoff
from runnercli.client import RunnerClient
from runnercli.exits import EXIT_OK, RunnerExit
from runnercli.jobrun import JobRun
from runnercli.options import RunOptions
from runnercli.redact import Redactor
from runnercli.repos.worktree import Worktrees
from runnercli.status import StatusLine
from runnercli.tools import ToolVersions


def _jobs(count: int) -> str:
    return f"{count} job{'s' if count != 1 else ''}"


class Session:
    """The client, the options, the status line, backoff, stop and abort, the fatal exit,
    the jobs held, the tool versions, the member's redaction and the worktrees of their
    repos of one runner session."""

    def __init__(
        self,
        client: RunnerClient,
        options: RunOptions,
        status: StatusLine,
        *,
        say: Callable[[], str] | None = None,
    ) -> None:
        self.client = client
        self.options = options
        self.status = status
        self.backoff = Backoff()
        self.tools = ToolVersions()
        # Whatever leaves the machine goes through it: log lines, the result's output and
        # stderr tail, failure reasons, the status; text artifacts, trace events and file
        # answers too.
        self.redactor: Redactor = options.redactor
        # One per session: it serializes `git worktree` commands on each checkout.
        self.worktrees = Worktrees()
        self.running: dict[int, JobRun] = {}
        # The first signal: take no new job. The second: hand the running ones back.
        self.stop = asyncio.Event()
        self.abort = asyncio.Event()
        self.fatal: RunnerExit | None = None
        self.fatal_event = asyncio.Event()
        self.exit_code = EXIT_OK
        self.last_failure: str | None = None
        # How the runner describes itself: its own words unless the runner adds to them
        # (a question waiting for the member, a pause).
        self._say = say or self.words

    # ---- what the runner says about itself

    def status_text(self) -> str:
        """The short status sent with lease and heartbeat, and shown on the status line."""
        return self.redactor.text(self._say())

    def words(self, paused: str = "") -> str:
        """The status from the session's own state, with a pause when there is one."""
        count = len(self.running)
        if self.stop.is_set():
            return f"draining, running {_jobs(count)}" if count else "stopping"
        if count:
            return f"running {_jobs(count)}; {paused}" if paused else f"running {_jobs(count)}"
        if paused:
            return paused
        if self.last_failure:
            return f"last job failed: {self.last_failure}"
        return "idle"

    def show(self) -> None:
        self.status.set(self.status_text())

    # ---- stopping

    def request_stop(self) -> None:
        """First call: take no new job, finish the running ones. Second: requeue them, leave."""
        if not self.stop.is_set():
            self.stop.set()
            if count := len(self.running):
                self.status.event(
                    f"stopping: finishing {count} running case(s); "
                    "signal again to hand them back and exit"
                )
            self.show()
            return
        if not self.abort.is_set():
            self.abort.set()
            self.status.event(f"aborting: handing back {len(self.running)} running case(s)")
            for job_run in self.running.values():
                job_run.abandoned = True
                job_run.kill.set()

    def die(self, exc: RunnerExit) -> None:
        """Stop the whole runner with `exc`: every case held is ended, nothing more reported."""
        if self.fatal is None:
            self.fatal = exc
        for job_run in self.running.values():
            job_run.lost_reason = str(exc)
            job_run.kill.set()
        self.fatal_event.set()

    async def pause(self, why: str, *, until: asyncio.Event | None = None) -> None:
        """Wait a backoff delay, cut short by `until` (a stop by default), saying why."""
        delay = self.backoff.next_delay()
        self.status.set(f"{why}, retrying in {delay:.1f}s")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for((until or self.stop).wait(), delay)
