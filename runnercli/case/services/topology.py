"""A topology: the services of one harness version (or of one case), started together, kept
while used, watched for death, and stopped together.

Its containers share a network of their own (each reachable there by its service name) and
carry the labels `everdict.runner`, `everdict.topology` (the harness digest), `everdict.service`
and `everdict.owner`; its processes are recorded beside the runner's config. A start is
bounded by the runner's `--max-service-starts` (images are pulled before, once each).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from runnercli.case.services.containers import ContainerService
from runnercli.case.services.daemon import daemon_problem
from runnercli.case.services.engine import (
    LABEL_OWNER,
    LABEL_RUNNER,
    LABEL_SCOPE,
    LABEL_SERVICE,
    LABEL_TOPOLOGY,
)
from runnercli.case.services.errors import FAILURE_LOG_LINES, NoDocker, ServiceError
from runnercli.case.services.places import Places, Where
from runnercli.case.services.ports import url_of
from runnercli.case.services.probes import NotReady, wait_ready
from runnercli.case.services.runtime import Runtime
from runnercli.protocol import CaseJob, ImageFingerprint, ServiceSpec
from runnercli.tasks import cancel_and_wait

MONITOR_S = 0.5


class Service(Protocol):
    name: str
    kind: str

    @property
    def port(self) -> int: ...
    def ports(self) -> dict[int, int]: ...
    async def start(self) -> None: ...
    async def ended(self) -> str | None: ...
    def mark(self) -> float: ...
    async def log_lines(self, tail: int, since: float | None = None) -> list[str]: ...
    async def stop(self) -> None: ...


@dataclass(frozen=True)
class Endpoint:
    """Where a case reaches a service: its first port, and each port by its own number."""

    name: str
    port: int
    ports: dict[int, int] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return url_of(self.port)


class Topology:
    """The services of one harness version (`scope: version`) or one case (`scope: case`)."""

    def __init__(
        self,
        job: CaseJob,
        services: dict[str, ServiceSpec],
        runtime: Runtime,
        *,
        scope: str,
        where: Where | None = None,
        on_death: Callable[[Topology], None] | None = None,
    ) -> None:
        self.digest = job.harness.digest
        self.title = f"{job.harness.name} v{job.harness.version}"
        self.scope = scope
        self.id = f"{self.digest[:12]}-{secrets.token_hex(3)}"
        self.specs = services
        self.runtime = runtime
        self.places = Places(job, runtime, self.id, where)
        self.on_death = on_death
        self.services: dict[str, Service] = {}
        self.images: dict[str, ImageFingerprint] = {}
        self.network: str | None = None
        self.died = asyncio.Event()
        self.death: ServiceError | None = None
        self.stopped = False
        self._monitor: asyncio.Task[None] | None = None

    def labels(self, service: str = "") -> dict[str, str]:
        labels = {
            LABEL_RUNNER: self.runtime.runner,
            LABEL_TOPOLOGY: self.digest,
            LABEL_OWNER: self.runtime.owner,
            LABEL_SCOPE: self.scope,
        }
        return {**labels, LABEL_SERVICE: service} if service else labels

    # ---- starting

    async def start(self) -> None:
        """Start every service and wait until each is ready; raise ServiceError (with the
        service's log tail) otherwise, leaving nothing behind."""
        try:
            await self._images()
            async with self.runtime.starts:
                await self._start_services()
                await asyncio.gather(*(self._ready(name) for name in self.services))
        except BaseException:
            await self.stop()
            raise
        self._monitor = asyncio.create_task(self._watch(), name=f"services-{self.id}")

    async def _images(self) -> None:
        containers = {name: spec for name, spec in self.specs.items() if spec.is_container}
        if not containers:
            return
        if (problem := await daemon_problem()) is not None:
            first = next(iter(containers))
            raise NoDocker(first, f"service {first} needs Docker: {problem}")
        engine = self.runtime.engine
        await asyncio.gather(
            *(engine.ensure_image(spec.image or "", name) for name, spec in containers.items())
        )
        for name, spec in containers.items():
            self.images[name] = await engine.fingerprint(spec.image or "")

    async def _start_services(self) -> None:
        if any(spec.is_container for spec in self.specs.values()):
            self.network = await self.runtime.engine.create_network(
                f"everdict-{self.id}", self.labels()
            )
        for name, spec in self.specs.items():
            service = await self._service(name, spec)
            self.services[name] = service
            await service.start()

    async def _service(self, name: str, spec: ServiceSpec) -> Service:
        if spec.is_container:
            assert self.network is not None
            return ContainerService(
                self.runtime.engine,
                name,
                spec,
                container_name=f"everdict-{self.id}-{name}",
                network=self.network,
                labels=self.labels(name),
            )
        return await self.places.process(name, spec, self.labels())

    async def _ready(self, name: str) -> None:
        service, spec = self.services[name], self.specs[name]
        probed = spec.fixed_port
        port = service.ports().get(probed, service.port) if probed is not None else service.port
        try:
            await wait_ready(
                spec.ready, port, alive=service.ended, proxied=service.kind == "container"
            )
        except NotReady as exc:
            tail = await service.log_lines(FAILURE_LOG_LINES)
            raise ServiceError(
                name,
                f"service {name} did not become ready: {exc}; waited on {spec.probe_text()}",
                tail,
            ) from exc

    # ---- while it runs

    def endpoints(self) -> dict[str, Endpoint]:
        return {
            name: Endpoint(name, service.port, service.ports())
            for name, service in self.services.items()
        }

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(MONITOR_S)
            for name, service in self.services.items():
                if (ended := await service.ended()) is not None:
                    tail = await service.log_lines(FAILURE_LOG_LINES)
                    self.death = ServiceError(
                        name, f"service {name} {ended} while a case used it", tail
                    )
                    self.died.set()
                    if self.on_death is not None:
                        self.on_death(self)
                    return

    # ---- stopping

    async def stop(self) -> None:
        """Stop every service (each TERM, then KILL after 5 s), its network, its places."""
        if self.stopped:
            return
        self.stopped = True
        monitor = self._monitor
        try:
            if monitor is not None and monitor is not asyncio.current_task():
                await cancel_and_wait(monitor)
        finally:
            results = await asyncio.gather(
                *(service.stop() for service in self.services.values()), return_exceptions=True
            )
            if self.network is not None:
                with contextlib.suppress(Exception):
                    await self.runtime.engine.remove_network(self.network)
            await self.places.remove()
        for result in results:
            if isinstance(result, Exception):
                self.runtime.say(f"⚠ stopping services of {self.title}: {result}")

    def describe(self) -> str:
        parts = [f"{name} at {endpoint.url}" for name, endpoint in self.endpoints().items()]
        return f"{self.title} ({self.scope}): {', '.join(parts)}"
