"""Containers through the Docker Engine API, with the official docker SDK (`everdict[docker]`).

The SDK is synchronous: every call runs in a worker thread. An image is pulled only when the
daemon does not have it, and once however many topologies want it at the same time (one pull
task per image, which they all wait on); its progress goes to the status line. Containers are
created and started, never `run` (which would pull on its own).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from runnercli.case.services.errors import NoDocker, ServiceError
from runnercli.protocol import ImageFingerprint

# Labels every container and network of a topology carries.
LABEL_RUNNER = "everdict.runner"
LABEL_TOPOLOGY = "everdict.topology"
LABEL_SERVICE = "everdict.service"
LABEL_OWNER = "everdict.owner"  # the runner process, as `pid:start-token`
LABEL_SCOPE = "everdict.scope"
STOP_TIMEOUT_S = 5
PULL_STATUS_EVERY_S = 2.0
SDK_MISSING = "container services need the docker SDK: pip install 'everdict[docker]'"

Say = Callable[[str], None]


def _sdk() -> Any:
    try:
        import docker
    except ImportError as exc:
        raise NoDocker("docker", SDK_MISSING) from exc
    return docker


class Engine:
    """One docker client for the runner, made on first use."""

    def __init__(self, say: Say | None = None) -> None:
        self.say = say or (lambda message: None)
        self._client: Any = None
        self._pulls: dict[str, asyncio.Task[None]] = {}
        # Pulls started by this engine (each image at most once at a time).
        self.pulls_started = 0

    def client(self) -> Any:
        if self._client is None:
            docker = _sdk()
            try:
                self._client = docker.from_env(timeout=60)
            except Exception as exc:
                raise NoDocker("docker", f"no Docker daemon: {exc}") from exc
        return self._client

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, *args, **kwargs)

    # ---- images

    async def ensure_image(self, image: str, service: str) -> None:
        """Have `image` on the daemon: pulled once (whoever asks meanwhile waits on that
        pull), and only when absent."""
        if await self.call(self._has_image, image):
            return
        task = self._pulls.get(image)
        if task is None or task.done():
            self.pulls_started += 1
            task = self._pulls[image] = asyncio.create_task(self._pull(image, service))
        await asyncio.shield(task)

    def _has_image(self, image: str) -> bool:
        import docker.errors

        try:
            self.client().images.get(image)
        except docker.errors.ImageNotFound:
            return False
        return True

    async def _pull(self, image: str, service: str) -> None:
        self.say(f"pulling {image} for service {service}…")
        began = time.monotonic()
        try:
            await self.call(self._pull_sync, image)
        except ServiceError:
            raise
        except Exception as exc:
            raise ServiceError(service, f"service {service}: cannot pull {image}: {exc}") from exc
        self.say(f"pulled {image} in {time.monotonic() - began:.1f}s")

    def _pull_sync(self, image: str) -> None:
        repository, tag = _split(image)
        last = 0.0
        for event in self.client().api.pull(repository, tag=tag, stream=True, decode=True):
            if "error" in event:
                raise RuntimeError(event["error"])
            now = time.monotonic()
            if now - last >= PULL_STATUS_EVERY_S:
                last = now
                progress = event.get("progress") or ""
                self.say(f"pulling {image}: {event.get('status', '')} {progress}".strip())

    async def fingerprint(self, image: str) -> ImageFingerprint:
        """The image's id, and its registry digest when it came from a registry."""
        attrs = (await self.call(self.client().images.get, image)).attrs
        digests = attrs.get("RepoDigests") or []
        return ImageFingerprint(
            id=str(attrs.get("Id", ""))[:200], digest=(digests or [""])[0][:300]
        )

    # ---- networks and containers

    async def create_network(self, name: str, labels: dict[str, str]) -> str:
        network = await self.call(
            self.client().networks.create, name, driver="bridge", labels=labels
        )
        return str(network.id)

    async def remove_network(self, network_id: str) -> None:
        import docker.errors

        try:
            network = await self.call(self.client().networks.get, network_id)
            await self.call(network.remove)
        except docker.errors.NotFound:
            pass

    async def start_container(self, **create: Any) -> str:
        """Create and start a container (never pulling); return its id."""
        return str(await self.call(self._start_sync, create))

    def _start_sync(self, create: dict[str, Any]) -> str:
        client = self.client()
        network, alias = create.pop("network"), create.pop("alias")
        endpoint = client.api.create_endpoint_config(aliases=[alias])
        # Docker's init as PID 1 passes SIGTERM on: a program that installs no handler of
        # its own (PID 1 has no default one) still stops at once rather than after the wait.
        container = client.containers.create(
            network=network, networking_config={network: endpoint}, detach=True, init=True, **create
        )
        container.start()
        return str(container.id)

    async def host_ports(self, container_id: str) -> dict[int, int]:
        """Each published container port and the host port Docker chose for it."""
        attrs = await self.call(self.client().api.inspect_container, container_id)
        published = (attrs.get("NetworkSettings") or {}).get("Ports") or {}
        ports = {}
        for key, bindings in published.items():
            if bindings and key.endswith("/tcp"):
                ports[int(key.split("/")[0])] = int(bindings[0]["HostPort"])
        return ports

    async def ended(self, container_id: str) -> str | None:
        """None while the container runs; else how it ended."""
        import docker.errors

        try:
            attrs = await self.call(self.client().api.inspect_container, container_id)
        except docker.errors.NotFound:
            return "was removed"
        state = attrs.get("State") or {}
        if state.get("Running"):
            return None
        return f"exited with status {state.get('ExitCode')}"

    async def log_lines(
        self, container_id: str, *, tail: int, since: float | None = None
    ) -> list[str]:
        import docker.errors

        kwargs: dict[str, Any] = {"tail": tail, "stdout": True, "stderr": True}
        if since is not None:
            kwargs["since"] = int(since)
        try:
            raw = await self.call(self.client().api.logs, container_id, **kwargs)
        except docker.errors.NotFound:
            return []
        return raw.decode("utf-8", errors="replace").splitlines()[-tail:]

    async def remove_container(self, container_id: str, stop_s: int = STOP_TIMEOUT_S) -> None:
        """Stop it (TERM, then KILL after `stop_s`) and remove it; fine when it is gone."""
        import docker.errors

        api = self.client().api
        try:
            await self.call(api.stop, container_id, timeout=stop_s)
        except docker.errors.NotFound:
            return
        except docker.errors.APIError:
            pass  # removed below by force
        try:
            await self.call(api.remove_container, container_id, force=True)
        except docker.errors.NotFound:
            pass

    async def labelled(self, labels: dict[str, str]) -> tuple[list[Any], list[Any]]:
        """The containers (running or not) and networks carrying these labels (a label
        with an empty value: any value)."""
        wanted = [f"{key}={value}" if value else key for key, value in labels.items()]
        client = self.client()
        # A container removed meanwhile (a topology stopping) is left out, not an error.
        containers = await self.call(
            client.containers.list, all=True, filters={"label": wanted}, ignore_removed=True
        )
        networks = await self.call(client.networks.list, filters={"label": wanted})
        return containers, networks


def _split(image: str) -> tuple[str, str | None]:
    """`repo:tag` → (repo, tag); a digest reference stays whole; no tag means `latest`."""
    if "@" in image:
        return image, None
    name, _, tag = image.rpartition(":")
    if name and "/" not in tag:
        return name, tag
    return image, "latest"
