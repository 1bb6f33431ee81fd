"""Container services: an image started on the topology's network, its ports published on
127.0.0.1 at ports Docker chooses, labelled so that a later `run` (or `services prune`) finds
what a killed runner left."""

from __future__ import annotations

import time

from runnercli.case.services.engine import STOP_TIMEOUT_S, Engine
from runnercli.case.services.errors import ServiceError
from runnercli.case.services.ports import HOST
from runnercli.protocol import ServiceSpec


class ContainerService:
    """One container service of a topology, started and stopped by it."""

    kind = "container"

    def __init__(
        self,
        engine: Engine,
        name: str,
        spec: ServiceSpec,
        *,
        container_name: str,
        network: str,
        labels: dict[str, str],
    ) -> None:
        self.engine = engine
        self.name = name
        self.spec = spec
        self.container_name = container_name
        self.network = network
        self.labels = labels
        self.container_id: str | None = None
        self._ports: dict[int, int] = {}

    @property
    def image(self) -> str:
        assert self.spec.image is not None
        return self.spec.image

    @property
    def port(self) -> int:
        """The host port of its first published port."""
        return self._ports[self.spec.ports[0]]

    def ports(self) -> dict[int, int]:
        return dict(self._ports)

    async def start(self) -> None:
        try:
            self.container_id = await self.engine.start_container(
                image=self.image,
                command=self.spec.command,
                name=self.container_name,
                labels=self.labels,
                environment=dict(self.spec.env),
                ports={f"{port}/tcp": (HOST, None) for port in self.spec.ports},
                network=self.network,
                alias=self.name,
            )
            self._ports = await self.engine.host_ports(self.container_id)
        except ServiceError:
            raise
        except Exception as exc:
            raise ServiceError(
                self.name, f"service {self.name} cannot start a container of {self.image}: {exc}"
            ) from exc
        missing = [port for port in self.spec.ports if port not in self._ports]
        if missing:
            raise ServiceError(
                self.name, f"service {self.name}: Docker published no host port for {missing}"
            )

    async def ended(self) -> str | None:
        if self.container_id is None:
            return "was not started"
        return await self.engine.ended(self.container_id)

    def mark(self) -> float:
        return time.time()

    async def log_lines(self, tail: int, since: float | None = None) -> list[str]:
        if self.container_id is None:
            return []
        return await self.engine.log_lines(self.container_id, tail=tail, since=since)

    async def stop(self, grace_s: float = STOP_TIMEOUT_S) -> None:
        if self.container_id is not None:
            await self.engine.remove_container(self.container_id, stop_s=int(grace_s))
