"""The runner's services, as one part of a running runner: its topologies, the leftovers of a
killed runner removed before the first lease, the capability `docker` kept true, and every
topology stopped when the runner leaves."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from runnercli.case.repo import Worktrees
from runnercli.case.services.inventory import Inventory
from runnercli.case.services.presence import DockerPresence
from runnercli.case.services.records import Records
from runnercli.case.services.registry import Topologies
from runnercli.case.services.runtime import Runtime
from runnercli.console.status import StatusLine
from runnercli.options import RunOptions
from runnercli.tasks import cancel_and_wait


class RunnerServices:
    def __init__(self, options: RunOptions, worktrees: Worktrees, status: StatusLine) -> None:
        self.status = status
        settings = options.services
        records_dir = settings.records_dir or Path(tempfile.gettempdir()) / (
            f"everdict-services-{os.getuid() if hasattr(os, 'getuid') else 'user'}"
        )
        self.runtime = Runtime(
            Records(records_dir),
            runner=settings.runner,
            max_starts=settings.max_starts,
            repos=options.repos,
            say=status.event,
            worktrees=worktrees,
        )
        self.topologies = Topologies(self.runtime, idle_s=settings.idle_s)
        self.presence = DockerPresence(options.capabilities, status.event)
        self.inventory = Inventory(self.runtime.engine, self.runtime.records, worktrees)
        self._presence_task: asyncio.Task[None] | None = None

    async def begin(self) -> None:
        """Before the first lease: remove what a killed runner of this config left, and
        learn whether Docker answers."""
        await self.presence.check()
        checkouts = [Path(path) for path in self.runtime.repos.values()]
        gone = await self.inventory.remove_leftovers(
            self.runtime.runner, tmp_root=self.runtime.tmp_root, checkouts=checkouts
        )
        for item in gone:
            held = ", ".join(item.services) or "a network"
            self.status.event(
                f"removed services left by a stopped runner: {item.topology[:12]} ({held})"
            )
        self._presence_task = asyncio.create_task(self.presence.run(), name="docker-presence")

    def no_docker(self, problem: str) -> None:
        """A leased harness needs Docker and none answers: say so, and re-check."""
        self.status.event(f"no Docker daemon: {problem}")
        task = asyncio.create_task(self.presence.check())
        task.add_done_callback(lambda _: None)

    async def close(self) -> None:
        """Stop watching for Docker, then every service (even when cancelled meanwhile)."""
        try:
            if self._presence_task is not None:
                await cancel_and_wait(self._presence_task)
        finally:
            if self.topologies.table or self.topologies.cases:
                self.status.event("stopping services…")
            await self.topologies.close()
