"""The `Services` stage: the containers and processes a harness's cases talk to.

Before the harness runs, it acquires the topology of the harness version (started now, or
joined while another case starts it, or warm) and starts the case's own services, then hands
the case where they are: `{service.NAME.url}`, `{service.NAME.port}` (the first port),
`{service.NAME.port.<p>}` (each port by its own number) and `EVERDICT_SERVICE_<NAME>_URL` /
`_PORT`. A service that does not become ready, or dies while the case runs, ends the case as
an error naming it, the probe it waited on and the last lines of its log — never as a fail
of the harness. Once the case is over, the lines its services logged meanwhile go to its
log, their images to its fingerprint, and the topology is released (the case's own services
are stopped).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from runnercli.case.pipeline import CaseContext, CaseEnded, Failed, Given, Stage
from runnercli.case.services import NoDocker, ServiceError, Topologies, Topology, Where
from runnercli.case.services.registry import scoped
from runnercli.tasks import cancel_and_wait

# Lines of each service's log a case's log gets, of those written while it ran.
CASE_LOG_LINES = 50
REPO_DIR_ENV = "EVERDICT_REPO_DIR"


def _env_name(service: str) -> str:
    return f"EVERDICT_SERVICE_{service.upper()}"


class Services(Stage):
    """Acquire the version's topology and start the case's own services, before `Execute`."""

    name = "services"
    needs = frozenset({Given.DIRECTORY})

    def __init__(
        self, topologies: Topologies, *, no_docker: Callable[[str], None] | None = None
    ) -> None:
        self.topologies = topologies
        # Told when a container service finds no Docker daemon (the status line says so).
        self.no_docker = no_docker or (lambda problem: None)
        self.shared: Topology | None = None
        self.own: Topology | None = None
        self.marks: dict[str, float] = {}
        self.watch: asyncio.Task[None] | None = None

    def held(self) -> list[Topology]:
        return [t for t in (self.shared, self.own) if t is not None]

    async def start(self, case: CaseContext) -> None:
        job = case.job
        try:
            if scoped(job, "version"):
                self.shared = await self.topologies.acquire(job)
            if scoped(job, "case"):
                repo_dir = case.env.get(REPO_DIR_ENV)
                where = Where(case.directory, job.case, Path(repo_dir) if repo_dir else None)
                self.own = await self.topologies.start_case(job, where)
        except ServiceError as exc:
            if isinstance(exc, NoDocker):
                self.no_docker(exc.summary)
            raise CaseEnded(self._failure(case, exc)) from exc
        for topology in self.held():
            self._hand_over(case, topology)
        self.watch = asyncio.create_task(self._watch(case), name=f"services-{job.job_id}")

    def _hand_over(self, case: CaseContext, topology: Topology) -> None:
        for name, endpoint in topology.endpoints().items():
            case.placeholders[f"service.{name}.url"] = endpoint.url
            case.placeholders[f"service.{name}.port"] = str(endpoint.port)
            for inner, outer in endpoint.ports.items():
                case.placeholders[f"service.{name}.port.{inner}"] = str(outer)
            case.env[f"{_env_name(name)}_URL"] = endpoint.url
            case.env[f"{_env_name(name)}_PORT"] = str(endpoint.port)
            self.marks[name] = topology.services[name].mark()
        case.note(f"services: {topology.describe()}")

    def _failure(self, case: CaseContext, exc: ServiceError) -> Failed:
        for line in exc.log_tail:
            case.note(f"[service {exc.service}] {line}")
        return Failed(str(exc), verb="error", summary=exc.summary)

    async def _watch(self, case: CaseContext) -> None:
        """End the case when a service it uses dies while the harness runs."""
        waits = [asyncio.create_task(t.died.wait()) for t in self.held()]
        exited = asyncio.create_task(case.exited.wait())
        try:
            await asyncio.wait([*waits, exited], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (*waits, exited):
                task.cancel()
        if case.exited.is_set():
            return
        death = next(t.death for t in self.held() if t.died.is_set() and t.death is not None)
        case.end(self._failure(case, death))

    async def finish(self, case: CaseContext) -> None:
        for topology in self.held():
            for name, service in topology.services.items():
                lines = await service.log_lines(CASE_LOG_LINES, since=self.marks.get(name))
                for line in lines:
                    case.note(f"[service {name}] {line}")

    async def cleanup(self, case: CaseContext) -> None:
        try:
            if self.watch is not None:
                await cancel_and_wait(self.watch)
        finally:
            self._fingerprint(case)
            if self.shared is not None:
                self.topologies.release(case.job, self.shared)
            if self.own is not None:
                await self.topologies.stop_case(self.own)

    def _fingerprint(self, case: CaseContext) -> None:
        """Each container service's image in the result's fingerprint (`Collect`, which
        built the result, has finished by the time cleanups run)."""
        images = {name: image for t in self.held() for name, image in t.images.items()}
        if case.result is None or not images:
            return
        fingerprint = case.result.fingerprint.model_copy(update={"images": images})
        case.result = case.result.model_copy(update={"fingerprint": fingerprint})
