"""Whether a leased case may run on this machine: the member decides, not the workspace.

In order, for every job:
1. its content: the spec must match the digest the job names (the runner computes it
   itself), and its environment may set no refused key (the protocol's list and the
   member's `refused_env`) — a server can lie, so this is checked here again;
2. `--allow-any`: the member opted out of being asked;
3. a pinned version arriving with another digest: the server lies — refused;
4. an entry allowing it (`run --allow` for this session, the config's `allow`, the trust
   store): it runs, and its version's digest is pinned on first run;
5. otherwise, on a terminal, the member is asked (one question at a time, the lease
   heartbeating meanwhile); without one, or on "no", or with no answer within
   `--consent-timeout`, the case ends with `fail_job` naming the `allow` command.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from runnercli.case.consent.pending import PendingPrompt
from runnercli.case.consent.prompt import TerminalPrompt, describe, first_of, one_line
from runnercli.case.consent.refusals import (
    RUN,
    Decision,
    Outcome,
    content_problem,
    lying,
    not_allowed,
    short,
)
from runnercli.case.consent.settings import ConsentSettings
from runnercli.case.consent.trust import Entry, HarnessId, ServerTrust, TrustError, TrustStore
from runnercli.console.status import StatusLine
from runnercli.console.terminal import quote_arg
from runnercli.protocol import CaseJob

QUESTION = "Run it? [o]nce / [a]lways for this version / [n]o  (no answer in {timeout}s = no): "


class Consent:
    """The decision for each job, and the one question on the terminal at a time."""

    def __init__(
        self,
        settings: ConsentSettings,
        status: StatusLine,
        *,
        on_change: Callable[[], None] = lambda: None,
        prompt: TerminalPrompt | None = None,
    ) -> None:
        self.settings = settings
        self.status = status
        self.on_change = on_change
        self.store = (
            TrustStore(settings.trust_file, settings.server) if settings.trust_file else None
        )
        self.prompt: TerminalPrompt | PendingPrompt | None = prompt
        if prompt is None and settings.ask:
            self.prompt = TerminalPrompt(status)
        elif prompt is None and settings.pending_dir is not None:
            self.prompt = PendingPrompt(
                settings.pending_dir,
                allow_command=lambda n: settings.command("allow", "--pending", str(n)),
            )
        self.waiting: list[str] = []
        # Pins of versions allowed for this session only, and the session's refusals (a
        # "no" is not asked again for every case of the same run).
        self._session_pins: dict[str, str] = {}
        self._refused: dict[tuple[str, str], str] = {}
        self._described: set[tuple[str, str]] = set()
        self._asking = asyncio.Lock()

    # ---- what the runner says about it

    def waiting_on(self) -> str | None:
        if not self.waiting:
            return None
        more = len(self.waiting) - 1
        return self.waiting[0] + (f" (+{more} more)" if more else "")

    def policy(self) -> str:
        if self.settings.allow_any:
            return "ANY harness the server sends (--allow-any)"
        entries = [str(e) for e in self.settings.session + self.settings.standing]
        try:
            entries += self._trust().allow
        except TrustError:
            pass
        then = "refuse"
        if isinstance(self.prompt, PendingPrompt):
            then = f"wait for an answer (`{self.settings.command('pending')}`)"
        elif self.prompt is not None:
            then = "ask on this terminal"
        listed = ", ".join(dict.fromkeys(entries)) or "nothing yet"
        return f"{listed}; anything else: {then}"

    # ---- the decision

    async def decide(self, job: CaseJob, *, kill: asyncio.Event, stop: asyncio.Event) -> Decision:
        harness = HarnessId.of(job)
        if problem := content_problem(job, harness, self.settings.refused_env):
            return Decision(Outcome.REFUSE, problem)
        if self.settings.allow_any:
            self._describe(job)
            return RUN
        decided = self._decided(job, harness)
        if decided is not None or self.prompt is None:
            return decided or Decision(Outcome.REFUSE, not_allowed(self.settings, harness))
        return await self._ask(job, harness, kill=kill, stop=stop)

    def _trust(self) -> ServerTrust:
        return self.store.read() if self.store is not None else ServerTrust()

    def _decided(self, job: CaseJob, harness: HarnessId) -> Decision | None:
        """The decision that needs no question, if there is one."""
        digest = job.harness.digest
        try:
            trust = self._trust()
        except TrustError as exc:
            return Decision(Outcome.REFUSE, f"cannot read the trust store: {exc}")
        # A version's digest is remembered for the session from the first time it is seen
        # (shown in a question, refused, run), for good from the first time it runs allowed.
        pinned = trust.pins.get(str(harness)) or self._session_pins.setdefault(str(harness), digest)
        if pinned != digest:
            return Decision(Outcome.REFUSE, lying(self.settings, harness, pinned, digest))
        if any(entry.covers(harness) for entry in self.settings.session):
            return self._run(job)
        if any(entry.covers(harness) for entry in self.settings.standing + trust.entries()):
            return self._run(job) if str(harness) in trust.pins else self._pinned_run(job, harness)
        refused = self._refused.get((str(harness), digest))
        return Decision(Outcome.REFUSE, refused) if refused is not None else None

    def _pinned_run(self, job: CaseJob, harness: HarnessId) -> Decision:
        digest = job.harness.digest
        try:
            pinned = self.store.pin(harness, digest) if self.store is not None else digest
        except TrustError as exc:
            self.status.event(f"⚠ could not pin {harness} in the trust store: {exc}")
            pinned = self._session_pins[str(harness)]
        if pinned != digest:  # pinned meanwhile, by a run that saw other content
            return Decision(Outcome.REFUSE, lying(self.settings, harness, pinned, digest))
        return self._run(job)

    def _run(self, job: CaseJob) -> Decision:
        self._describe(job)
        return RUN

    def _describe(self, job: CaseJob) -> None:
        key = (str(HarnessId.of(job)), job.harness.digest)
        if key not in self._described:
            self._described.add(key)
            self.status.event(one_line(job, self.settings.withheld))

    # ---- asking

    async def _ask(
        self, job: CaseJob, harness: HarnessId, *, kill: asyncio.Event, stop: asyncio.Event
    ) -> Decision:
        assert self.prompt is not None
        self.waiting.append(str(harness))
        self.on_change()
        # One patience for the whole wait: behind another question, then on this one.
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.timeout_s
        try:
            interrupts = [kill, stop]
            got, _ = await first_of(self._asking.acquire(), interrupts, self.settings.timeout_s)
            if not got:
                answer = "interrupted" if kill.is_set() or stop.is_set() else "timeout"
                return self._unanswered(harness, answer, kill, job.harness.digest)
            try:
                # Another question may have settled it meanwhile ("always", "no", an `allow`).
                decided = self._decided(job, harness)
                if decided is not None:
                    return decided
                if kill.is_set() or stop.is_set():
                    return self._unanswered(harness, "interrupted", kill)
                patience = max(1.0, deadline - loop.time())
                if isinstance(self.prompt, PendingPrompt):
                    self.prompt.about = str(harness)
                    self.status.event(
                        f"… {harness} waits for your consent: "
                        f"`{self.settings.command('pending')}` shows it"
                    )
                answer = await self.prompt.ask(
                    [
                        f"⚠ run {job.run_id} case {quote_arg(job.case.key)}: the server asks "
                        "this runner to run a harness version you have not allowed:",
                        *describe(job, self.settings.withheld, self.settings.redact_patterns),
                    ],
                    QUESTION.format(timeout=f"{patience:.0f}"),
                    patience,
                    interrupts,
                )
            finally:
                self._asking.release()
        finally:
            self.waiting.remove(str(harness))
            self.on_change()
        return self._answered(job, harness, answer, kill)

    def _answered(
        self, job: CaseJob, harness: HarnessId, answer: str, kill: asyncio.Event
    ) -> Decision:
        if answer == "once":
            self.status.event(f"→ running {harness} once")
            self._described.add((str(harness), job.harness.digest))
            return RUN
        if answer == "always":
            return self._always(job, harness)
        return self._unanswered(harness, answer, kill, digest=job.harness.digest)

    def _always(self, job: CaseJob, harness: HarnessId) -> Decision:
        self._described.add((str(harness), job.harness.digest))
        if self.store is None:
            self.settings.session.append(Entry.exact(harness))
            self.status.event(f"→ {harness} allowed for this session (no trust store)")
            return RUN
        try:
            self.store.add(Entry.exact(harness))
        except TrustError as exc:
            self.status.event(f"⚠ could not save {harness} in the trust store: {exc}")
            self.settings.session.append(Entry.exact(harness))
        self.status.event(
            f"→ {harness} allowed from now on, pinned to {short(job.harness.digest)} "
            f"(`{self.settings.command('trust')}` lists it)"
        )
        return self._pinned_run(job, harness)

    def _unanswered(
        self, harness: HarnessId, answer: str, kill: asyncio.Event, digest: str = ""
    ) -> Decision:
        if answer == "interrupted":
            if kill.is_set():
                return Decision(Outcome.LOST, "the server took the job back")
            return Decision(Outcome.HAND_BACK, "the runner was stopped by its owner")
        command = f"`{self.settings.command('allow', str(harness))}`"
        if answer == "no":
            reason = self.prompt.reason if isinstance(self.prompt, PendingPrompt) else ""
            message = (
                f"the member refused to run harness {harness} on this runner"
                f"{f' ({reason})' if reason else ''}; to allow it: {command}"
            )
        elif answer == "timeout":
            message = (
                f"no answer within {self.settings.timeout_s:g}s to run harness {harness} on "
                f"this runner; to allow it: {command}"
            )
        else:
            message = not_allowed(self.settings, harness)
        self.status.event(f"→ refused {harness}")
        if digest:
            self._refused[(str(harness), digest)] = message
        return Decision(Outcome.REFUSE, message)
