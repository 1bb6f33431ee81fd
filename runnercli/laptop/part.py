"""The runner on a member's machine: awake while it works, paused on battery, its own report
beside its config, and a roster told of every change of its status within seconds.

- The sleep inhibitor (`runnercli.laptop.inhibit`) is held from the first running case to the end
  of the last (`--allow-sleep` turns it off).
- The power source (`runnercli.laptop.power`) is read before every lease and every few seconds:
  under `--on-battery pause` a runner on battery finishes what it holds and leases nothing.
- The report (`runnercli.laptop.state`) is what `python -m runnercli status` reads: the runner's
  status line, its cases, the inhibitor, why it is paused.
- A status that changed is sent with `hello` at once: a lease parked on the server keeps the
  status it was sent with, and the roster must not say "running 2 jobs" for a minute after
  the last result.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable

from runnercli.case.delivery.ratelimit import PAUSE_BEAT_S
from runnercli.client import RunnerError
from runnercli.laptop.inhibit import Inhibitor
from runnercli.laptop.power import OnBattery, PowerState, PowerWatcher, pause_reason, power_state
from runnercli.laptop.state import StateFile
from runnercli.laptop.updates import update_advice
from runnercli.session import Session
from runnercli.tasks import wait_event

# How often the report and the roster are brought up to date: a changed status reaches the
# roster within this, plus one call.
TICK_S = 0.5
# How often the power source is read while nothing asks for it (sysfs reads are cheap; on
# macOS it is a `pmset` process).
POWER_POLL_S = float(os.environ.get("EVERDICT_POWER_POLL_S", "2"))


class Laptop:
    """The inhibitor, the battery pause, the runner's report and the roster's status."""

    def __init__(
        self,
        session: Session,
        *,
        read_power: Callable[[], PowerState] = power_state,
        waiting: Callable[[], int] = lambda: 0,
    ) -> None:
        # How many questions wait for the member's consent (for the report).
        self.waiting = waiting
        self.session = session
        options = session.options
        self.policy = OnBattery(options.on_battery)
        self.inhibitor = Inhibitor(allow_sleep=options.allow_sleep, say=session.status.event)
        self.power = PowerWatcher(self._power_changed, read=read_power, interval_s=POWER_POLL_S)
        self.state = StateFile(options.state_file) if options.state_file else None
        self.on_ac = asyncio.Event()
        self.on_ac.set()
        # Set while paused on battery: a lease parked on the server is called off.
        self.paused_event = asyncio.Event()
        self.update_note = ""
        self._sent = ""
        # What the server was last told of the battery pause (None: nothing yet).
        self._sent_reason: str | None = None
        self._sent_at = 0.0
        self._state_failed = False

    # ---- the battery pause

    def reason(self) -> str | None:
        """ "on battery" while the policy keeps this runner from leasing, else None."""
        return pause_reason(self.policy, self.power.current) if self.power.current else None

    def paused(self) -> str:
        """The pause as the status line says it: "paused: on battery"."""
        return f"paused: {reason}" if (reason := self.reason()) else ""

    def _power_changed(self, state: PowerState) -> None:
        if pause_reason(self.policy, state):
            self.on_ac.clear()
            self.paused_event.set()
            self.session.status.event(
                f"⏸ on battery ({state}): finishing what this runner holds, leasing nothing "
                "until it is on AC (--on-battery run leases anyway)"
            )
        else:
            if not self.on_ac.is_set() and self.power.current is not None:
                self.session.status.event(f"▶ on AC ({state}): leasing again")
            self.on_ac.set()
            self.paused_event.clear()
        self.session.show()

    async def wait_for_power(self) -> None:
        """Lease nothing while on battery (under `pause`); the power is read afresh first."""
        await self.power.check()
        stop = self.session.stop
        while not self.on_ac.is_set() and not stop.is_set():
            await wait_event(stop, POWER_POLL_S)
            await self.power.check()

    # ---- updates

    def greeted(self, latest: str) -> None:
        """The server named its newest runner: say once how to update when it is newer."""
        advice = update_advice(latest)
        if advice is not None and advice.newer:
            self.update_note = advice.line()
            self.session.status.event(f"⬆ {self.update_note}")

    # ---- the report and the roster

    async def run(self) -> None:
        """Keep the report and the roster current, and the power read, until cancelled."""
        self._sent = self.session.status_text()
        ticks_per_read = max(1, round(POWER_POLL_S / TICK_S))
        tick = 0
        try:
            while True:
                if tick % ticks_per_read == 0:
                    await self.power.check()
                tick += 1
                await self._hold_while_running()
                self.report()
                await self._send_status()
                await asyncio.sleep(TICK_S)
        finally:
            await self.inhibitor.close()
            self.report()

    async def _hold_while_running(self) -> None:
        """Held while at least one case runs; released when the last ends."""
        running = sum(1 for job_run in self.session.running.values() if not job_run.finished)
        if running and self.inhibitor.count == 0:
            await self.inhibitor.hold()
        elif not running and self.inhibitor.count:
            await self.inhibitor.release()

    def report(self) -> None:
        if self.state is None or self._state_failed:
            return
        session = self.session
        try:
            self.state.update(
                status=session.status_text(),
                running=len(session.running),
                inhibitor=str(self.inhibitor.status),
                paused=self.reason(),
                pending_consents=self.waiting(),
                update=self.update_note,
            )
        except OSError as exc:
            self._state_failed = True
            session.status.event(f"⚠ cannot write this runner's report {self.state.path}: {exc}")

    async def _send_status(self) -> None:
        """Tell the server a changed status (and pause) at once; while paused, again every
        PAUSE_BEAT_S: no lease call carries it meanwhile, and the roster must say why."""
        text, reason = self.session.status_text(), self.reason() or ""
        loop = asyncio.get_running_loop()
        due = bool(reason) and loop.time() - self._sent_at >= PAUSE_BEAT_S
        if text == self._sent and reason == self._sent_reason and not due:
            return
        if self.session.stop.is_set() and not self.session.running:
            return
        self._sent, self._sent_reason, self._sent_at = text, reason, loop.time()
        with contextlib.suppress(RunnerError):  # the next call says what is wrong
            await self.session.client.hello(
                capabilities=self.session.options.capabilities, status=text, paused_reason=reason
            )
