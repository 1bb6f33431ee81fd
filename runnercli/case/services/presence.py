"""The capability `docker`, declared only while the docker SDK imports and a Docker daemon
answers (what a container service needs).

Checked when the runner starts (before its `hello`), every RECHECK_S after, and whenever a
case finds no daemon; the runner's capability list is changed in place, so its next
`lease_job` says it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from runnercli.case.services.daemon import daemon_problem

CAPABILITY = "docker"


def sdk_problem() -> str | None:
    try:
        import docker  # noqa: F401
    except ImportError:
        return "the docker SDK is not installed: pip install 'everdict[docker]'"
    return None


RECHECK_S = 30.0


class DockerPresence:
    def __init__(
        self, capabilities: list[str], say: Callable[[str], None], recheck_s: float = RECHECK_S
    ) -> None:
        self.capabilities = capabilities
        self.say = say
        self.recheck_s = recheck_s
        self.problem: str | None = "not checked yet"

    async def check(self) -> str | None:
        """Ask the daemon; keep `docker` among the capabilities only when it answers."""
        problem = sdk_problem() or await daemon_problem()
        had = CAPABILITY in self.capabilities
        if problem is None and not had:
            self.capabilities.append(CAPABILITY)
        elif problem is not None and had:
            self.capabilities.remove(CAPABILITY)
        if (problem is None) != (self.problem is None) and self.problem != "not checked yet":
            self.say(
                "Docker daemon answers: capability docker"
                if problem is None
                else f"no Docker daemon: {problem}"
            )
        self.problem = problem
        return problem

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.recheck_s)
            await self.check()
