"""What runs as services on this machine, found from outside a runner: containers and networks
by their labels, processes by their records. `services list | stop | prune`, and `run` at its
start (before its first lease), which removes what a runner killed with `kill -9` left.

A topology is *live* while the runner process that started it runs, a *leftover* otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runnercli.case.repo import Worktrees
from runnercli.case.repo.leftovers import sweep_case_dirs
from runnercli.case.services.daemon import daemon_problem
from runnercli.case.services.engine import (
    LABEL_OWNER,
    LABEL_RUNNER,
    LABEL_SERVICE,
    LABEL_TOPOLOGY,
    Engine,
)
from runnercli.case.services.errors import ServiceError
from runnercli.case.services.processes import end_leftover
from runnercli.case.services.records import Records, owner_alive
from runnercli.case.services.runtime import SERVICE_DIR_PREFIX


@dataclass
class Found:
    """One topology as found: its digest, its runner and owner, and what it holds."""

    topology: str
    runner: str
    owner: str
    live: bool
    services: list[str] = field(default_factory=list)
    containers: list[Any] = field(default_factory=list)
    networks: list[Any] = field(default_factory=list)
    processes: list[Any] = field(default_factory=list)


class Inventory:
    def __init__(
        self, engine: Engine, records: Records, worktrees: Worktrees | None = None
    ) -> None:
        self.engine = engine
        self.records = records
        # The runner's own, when it has one: one lock per checkout for all its worktrees.
        self.worktrees = worktrees or Worktrees()
        self.docker_problem: str | None = None

    async def find(self, runner: str | None = None) -> list[Found]:
        """Every topology on this machine (of `runner` alone, when given)."""
        found: dict[tuple[str, str], Found] = {}

        def entry(topology: str, runner_: str, owner: str) -> Found:
            key = (topology, owner)
            if key not in found:
                found[key] = Found(topology, runner_, owner, owner_alive(owner))
            return found[key]

        for container, network in await self._docker(runner):
            labels = (
                container.labels if container is not None else network.attrs.get("Labels")
            ) or {}
            item = entry(
                labels.get(LABEL_TOPOLOGY, "?"),
                labels.get(LABEL_RUNNER, "?"),
                labels.get(LABEL_OWNER, ""),
            )
            if container is not None:
                item.containers.append(container)
                service = labels.get(LABEL_SERVICE, "?")
                item.services.append(f"{service} (container {container.name}, {container.status})")
            else:
                item.networks.append(network)
        for record in self.records.all():
            if runner is None or record.runner == runner:
                item = entry(record.topology, record.runner, record.owner)
                item.processes.append(record)
                state = "running" if record.alive() else "gone"
                item.services.append(
                    f"{record.service} (process {record.pid} on :{record.port}, {state})"
                )
        return list(found.values())

    async def _docker(self, runner: str | None) -> list[tuple[Any, Any]]:
        self.docker_problem = await daemon_problem()
        if self.docker_problem is not None:
            return []
        try:
            containers, networks = await self.engine.labelled({LABEL_RUNNER: runner or ""})
        except ServiceError as exc:  # no SDK
            self.docker_problem = exc.summary
            return []
        return [(c, None) for c in containers] + [(None, n) for n in networks]

    async def remove(self, topologies: Iterable[Found]) -> int:
        """Remove what these topologies hold; return how many of them there were."""
        count = 0
        for item in topologies:
            count += 1
            for container in item.containers:
                await self.engine.remove_container(str(container.id))
            for network in item.networks:
                await self.engine.remove_network(str(network.id))
            for record in item.processes:
                await asyncio.to_thread(end_leftover, record)
                self.records.forget(record)
        return count

    async def remove_leftovers(
        self, runner: str | None, *, tmp_root: Path, checkouts: Iterable[Path] = ()
    ) -> list[Found]:
        """Remove the topologies whose runner is gone, and the directories and worktrees
        made for their processes; return what was removed."""
        gone = [item for item in await self.find(runner) if not item.live]
        await self.remove(gone)
        await self.worktrees.remove_leftovers(checkouts, root=tmp_root, prefix=SERVICE_DIR_PREFIX)
        await asyncio.to_thread(sweep_case_dirs, tmp_root, SERVICE_DIR_PREFIX)
        return gone
