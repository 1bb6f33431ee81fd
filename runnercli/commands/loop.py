"""The runner `run` starts (and `submit --here`): a session with the server, and the parts
built from it, until told to stop.

One MCP session; one leaser (`runnercli.leaser`) long-polls `lease_job` for as many jobs as
there are free slots (`--max-concurrent`), and each job's case goes through its pipeline
(`runnercli.case.jobs`, `runnercli.case`) while it heartbeats and pushes its log; results go
through one sender, which groups those that finish together into one call
(`runnercli.case.delivery`). The member stays in charge: nothing runs without their consent
(`runnercli.case.consent`), the first signal drains, the second one requeues what is running
and leaves.

Here: the parts put together, the runner's greeting and its lifecycle.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

from runnercli.case.consent.decide import Consent
from runnercli.case.consent.settings import ConsentSettings
from runnercli.case.delivery.ratelimit import Pauses
from runnercli.case.delivery.reports import Delivery
from runnercli.case.delivery.spool import Spool
from runnercli.case.files.rendezvous import CaseFiles
from runnercli.case.heartbeats import Heartbeats
from runnercli.case.jobs import Jobs
from runnercli.case.repo import RepoError, Worktrees
from runnercli.case.repo.git import GitError
from runnercli.case.services.part import RunnerServices
from runnercli.case.trace.outbox import TraceOutbox
from runnercli.client import RevokedError, RunnerClient, ServerUnavailable, ToolCallError
from runnercli.console.exits import (
    EXIT_NOT_REPORTED,
    EXIT_REVOKED,
    EXIT_UPDATE_REQUIRED,
    REVOKED_MESSAGE,
    RunnerExit,
)
from runnercli.console.status import StatusLine, shorten
from runnercli.laptop.part import Laptop
from runnercli.laptop.updates import upgrade_message
from runnercli.leaser import Leaser
from runnercli.options import RunOptions
from runnercli.protocol import MAX_STATUS_CHARS, PROTOCOL_VERSION
from runnercli.session import Session
from runnercli.slots import Slots


class RunnerLoop:
    """Lease, run and report until told to stop."""

    def __init__(
        self,
        client: RunnerClient,
        options: RunOptions,
        status: StatusLine,
        *,
        consent: ConsentSettings | None = None,
    ) -> None:
        self.session = session = Session(client, options, status, say=self.status_text)
        self.consent = Consent(consent or ConsentSettings(), status, on_change=session.show)
        spool = Spool(options.spool_dir, client.url) if options.spool_dir else None
        self.delivery = Delivery(session, spool)
        self.heartbeats = Heartbeats(session)
        self.pauses = Pauses(session, self.delivery)
        # One per runner: it serializes `git worktree` commands on each checkout.
        self.worktrees = Worktrees()
        self.services = RunnerServices(options, self.worktrees, status)
        slots = Slots(options.slots, lease_ahead=not options.once)
        self.laptop = Laptop(session, waiting=lambda: len(self.consent.waiting))
        self.traces = TraceOutbox(session, options.spool_dir)
        self.files = CaseFiles(session)
        jobs = Jobs(
            session,
            slots=slots,
            consent=self.consent,
            heartbeats=self.heartbeats,
            delivery=self.delivery,
            pauses=self.pauses,
            worktrees=self.worktrees,
            traces=self.traces,
            services=self.services,
            files=self.files,
        )
        self.leaser = Leaser(
            session,
            slots=slots,
            jobs=jobs,
            heartbeats=self.heartbeats,
            pauses=self.pauses,
            delivery=self.delivery,
            laptop=self.laptop,
        )

    def status_text(self) -> str:
        """The short status sent with lease and heartbeat, and shown on the status line."""
        if waiting := self.consent.waiting_on():
            return shorten(f"waiting for consent on {waiting}", MAX_STATUS_CHARS)
        paused = "; ".join(filter(None, [self.laptop.paused(), self.pauses.text()]))
        return self.session.words(paused=paused)

    def request_stop(self) -> None:
        """First call: take no new job, finish the running ones. Second: requeue them, leave."""
        self.session.request_stop()

    async def run(self) -> int:
        session = self.session
        try:
            await self._remove_leftovers()
            # What a killed runner left is removed before the first lease.
            await self.services.begin()
            await self._greet()
            if session.stop.is_set():
                return session.exit_code
            # What an earlier run finished but could not deliver goes first.
            self.traces.resend_spooled()
            await self.delivery.resend_spooled()
            leaser = asyncio.create_task(self.leaser.run())
            watcher = asyncio.create_task(self.heartbeats.sleep_watch.run(), name="sleep-watch")
            files = asyncio.create_task(self.files.run(), name="case-files")
            laptop = asyncio.create_task(self.laptop.run(), name="laptop")
            fatal = asyncio.create_task(session.fatal_event.wait())
            await asyncio.wait([leaser, fatal], return_when=asyncio.FIRST_COMPLETED)
            # Either the leaser finished, or a fatal error came and it must go.
            if session.fatal is not None:
                leaser.cancel()
            await asyncio.gather(leaser, return_exceptions=True)
            fatal.cancel()
            watcher.cancel()
            files.cancel()
            laptop.cancel()
            await asyncio.gather(laptop, return_exceptions=True)
        except RunnerExit as exc:
            session.fatal = exc
        finally:
            await self.services.close()
            await self.delivery.close()
            await self.traces.close()
        if session.fatal is not None:
            session.status.event(f"✗ {session.fatal}")
            return session.fatal.code
        session.status.event("stopped")
        return session.exit_code

    async def _remove_leftovers(self) -> None:
        """Remove the worktrees (and case directories) of the member's repos that a runner
        stopped with `kill -9` left behind: no case of it will ever clean them up."""
        checkouts = [Path(path) for path in self.session.options.repos.values()]
        if not checkouts:
            return
        try:
            removed = await self.worktrees.remove_leftovers(checkouts)
        except (RepoError, GitError) as exc:
            self.session.status.event(f"⚠ could not remove the worktrees of a killed runner: {exc}")
            return
        for path in removed:
            self.session.status.event(f"removed a worktree a killed runner left: {path}")

    async def _greet(self) -> None:
        session, options = self.session, self.session.options
        while not session.stop.is_set():
            try:
                hello = await session.client.hello(
                    capabilities=options.capabilities, status=session.status_text()
                )
            except ServerUnavailable as exc:
                await session.pause(f"cannot reach server: {exc}")
                continue
            except RevokedError as exc:
                raise RunnerExit(EXIT_REVOKED, REVOKED_MESSAGE) from exc
            except ToolCallError as exc:
                raise RunnerExit(
                    EXIT_NOT_REPORTED, f"the server refused this runner: {exc}"
                ) from exc
            session.backoff.reset()
            if hello.update_required:
                raise RunnerExit(EXIT_UPDATE_REQUIRED, upgrade_message(PROTOCOL_VERSION))
            self.laptop.greeted(hello.latest_runner_version)
            if self.consent.settings.allow_any:
                session.status.event(
                    "⚠ --allow-any: this runner runs any harness the server sends, as you, "
                    "without asking. Use it on throwaway machines only."
                )
            session.status.event(
                f"connected to {session.client.url} as runner {hello.runner_id} “{hello.label}” "
                f"of {hello.owner}; capabilities: {', '.join(options.capabilities)}; "
                f"allowed: {self.consent.policy()}; up to {options.slots} case(s) at once"
                f"{_kept_here(options)}"
            )
            session.show()
            return


def _kept_here(options: RunOptions) -> str:
    """What the member keeps on this machine: redacted matches, and what is not sent."""
    said = ""
    if count := len(options.redactor.patterns):
        said += f"; redacting what leaves with {count} pattern{'s' if count != 1 else ''}"
    if options.withheld:
        said += f"; not sent: {', '.join(sorted(options.withheld))}"
    return said


@contextlib.contextmanager
def stopping_on_signals(request_stop: Callable[[], None]) -> Iterator[None]:
    """SIGINT and SIGTERM call `request_stop` while inside (in the running event loop)."""
    loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, request_stop)
    try:
        yield
    finally:
        for sig in signals:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
