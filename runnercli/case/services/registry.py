"""The runner's topologies: one per harness version, shared by the cases of that version.

Concurrent cases of one version wait on one start (single-flight); the topology stays warm
while the runner holds cases of that version and is stopped `idle_s` after the last one, or
when the runner leaves. A start that fails fails every case waiting on it, and the next case
starts afresh; a topology whose service dies is dropped at once (the cases holding it are
ended by their stage) and the next case of the version starts a new one. Case-scoped services
start and stop with their case.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from runnercli.case.services.places import Where
from runnercli.case.services.runtime import Runtime
from runnercli.case.services.topology import Topology
from runnercli.protocol import CaseJob, ServiceSpec
from runnercli.tasks import ended

IDLE_S = 300.0


@dataclass(eq=False)
class Held:
    topology: Topology
    starting: asyncio.Task[None]
    holders: int = 0
    idle: asyncio.TimerHandle | None = None


def scoped(job: CaseJob, scope: str) -> dict[str, ServiceSpec]:
    return {n: s for n, s in (job.harness.spec.services or {}).items() if s.scope == scope}


def version_key(job: CaseJob) -> str:
    """The harness digest; with the run's commit too when a service runs in the repo at it."""
    spec, key = job.harness.spec, job.harness.digest
    in_repo = any(s.cwd == "repo" for s in scoped(job, "version").values())
    if in_repo and spec.repo is not None and spec.repo.ref == "run":
        key += f"@{job.git_sha or ''}"
    return key


class Topologies:
    """Acquire and release the topology of a job's version; start and stop a case's own."""

    def __init__(self, runtime: Runtime, idle_s: float = IDLE_S) -> None:
        self.runtime = runtime
        self.idle_s = idle_s
        self.table: dict[str, Held] = {}
        self.cases: set[Topology] = set()
        self._stopping: dict[str, asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[None]] = set()

    # ---- version scope

    async def acquire(self, job: CaseJob) -> Topology:
        """The version's topology once it is ready (started now, or being started, or warm);
        raise ServiceError when it cannot be. Each acquire is paired with a `release`."""
        key = version_key(job)
        held = self.table.get(key)
        if held is None:
            if (stopping := self._stopping.get(key)) is not None:
                await asyncio.shield(stopping)
            held = self.table.get(key) or self._start(key, job)
        held.holders += 1
        if held.idle is not None:
            held.idle.cancel()
            held.idle = None
        try:
            await asyncio.shield(held.starting)
        except BaseException:
            self._let_go(key, held)
            raise
        return held.topology

    def _start(self, key: str, job: CaseJob) -> Held:
        topology = Topology(
            job, scoped(job, "version"), self.runtime, scope="version", on_death=self._died
        )
        held = Held(topology, asyncio.create_task(topology.start(), name=f"start-{topology.id}"))
        self.table[key] = held
        held.starting.add_done_callback(lambda task: self._started(key, held, task))
        return held

    def _started(self, key: str, held: Held, task: asyncio.Task[None]) -> None:
        if task.cancelled() or task.exception() is not None:
            if self.table.get(key) is held:
                del self.table[key]
            return
        self.runtime.say(f"services up: {held.topology.describe()}")
        if held.holders == 0:
            self._idle(key, held)

    def release(self, job: CaseJob, topology: Topology) -> None:
        """A case of the version is over: after the last one, stop it `idle_s` later."""
        key = version_key(job)
        held = self.table.get(key)
        if held is not None and held.topology is topology:
            self._let_go(key, held)

    def _let_go(self, key: str, held: Held) -> None:
        held.holders = max(0, held.holders - 1)
        if held.holders == 0 and held.starting.done() and self.table.get(key) is held:
            self._idle(key, held)

    def _idle(self, key: str, held: Held) -> None:
        loop = asyncio.get_running_loop()
        held.idle = loop.call_later(self.idle_s, self._expire, key, held)

    def _expire(self, key: str, held: Held) -> None:
        if self.table.get(key) is held and held.holders == 0:
            del self.table[key]
            self.runtime.say(
                f"services of {held.topology.title} idle for {self.idle_s:g}s: stopping"
            )
            self._stop_later(key, held.topology)

    def _died(self, topology: Topology) -> None:
        for key, held in list(self.table.items()):
            if held.topology is topology:
                del self.table[key]
                self.runtime.say(f"✗ {topology.death}: stopping it; the next case starts it again")
                self._stop_later(key, topology)

    def _stop_later(self, key: str, topology: Topology) -> None:
        task = asyncio.create_task(topology.stop(), name=f"stop-{topology.id}")
        self._stopping[key] = task
        self._background.add(task)

        def done(finished: asyncio.Task[None]) -> None:
            self._background.discard(finished)
            if self._stopping.get(key) is finished:
                del self._stopping[key]

        task.add_done_callback(done)

    # ---- case scope

    async def start_case(self, job: CaseJob, where: Where) -> Topology:
        topology = Topology(job, scoped(job, "case"), self.runtime, scope="case", where=where)
        self.cases.add(topology)
        try:
            await topology.start()
        except BaseException:
            self.cases.discard(topology)
            raise
        return topology

    async def stop_case(self, topology: Topology) -> None:
        self.cases.discard(topology)
        await topology.stop()

    # ---- all of them

    def warm(self) -> list[Topology]:
        return [held.topology for held in self.table.values() if held.starting.done()]

    async def close(self) -> None:
        """Stop everything (the runner is leaving)."""
        helds = list(self.table.values())
        self.table.clear()
        for held in helds:
            if held.idle is not None:
                held.idle.cancel()
            # A start still waiting on a probe is cut short: it stops what it started.
            held.starting.cancel()
        try:
            for held in helds:
                with contextlib.suppress(Exception):
                    await ended(held.starting)
        finally:
            # Every service stops, even when this close is cancelled meanwhile.
            stops = [held.topology.stop() for held in helds]
            stops += [topology.stop() for topology in list(self.cases)]
            self.cases.clear()
            await asyncio.gather(*stops, *self._background, return_exceptions=True)
