"""A harness's services: the containers and processes its cases talk to (protocol 3).

`services: {NAME: SERVICE}`. A SERVICE is a container `{image, command?, env?, ports, ready}`
or a process `{run: [argv], cwd: repo | case, env?, ready}`, started once per harness version
(`scope: version`, the default) or per case (`scope: case`). `ready` is a TCP or HTTP probe.

A process is given a free port as `{port}` in its argv and `PORT` in its environment, and is
reached there — unless its probe names a port (`tcp: P`, or `http` with `port: P`): then it
listens on that fixed port (a dev server that ignores `PORT`) and is reached there. A
case-scoped process's argv may also use the case's placeholders (`{input.…}`, `{case.key}`).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from runnercli.protocol.env import check_env
from runnercli.protocol.received import Received

SERVICE_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")
# `[registry[:port]/]path[:tag][@sha256:digest]`, as `docker pull` reads it.
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
IMAGE_RE = re.compile(
    rf"(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?{_PATH_PART}(?:/{_PATH_PART})*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?"
)
MAX_SERVICES = 16
MAX_SERVICE_PORTS = 8

Port = Annotated[int, Field(ge=1, le=65535)]


class ReadyProbe(Received):
    """How the runner knows a service is up: a TCP connect, or an HTTP GET answering
    `status`. A container's probe names one of its published ports; a process's HTTP probe
    without `port` asks the free port the runner gave it (`{port}`)."""

    tcp: Port | None = None
    http: str | None = Field(default=None, max_length=500, pattern=r"^/")
    port: Port | None = None
    status: int = Field(default=200, ge=100, le=599)
    timeout_s: int = Field(default=60, ge=1, le=1800)

    @model_validator(mode="after")
    def _one_probe(self) -> ReadyProbe:
        if (self.tcp is None) == (self.http is None):
            raise ValueError("ready needs exactly one of tcp: PORT or http: PATH")
        if self.tcp is not None and self.port is not None:
            raise ValueError("a tcp probe names its port as tcp: PORT, without port")
        return self


class ServiceSpec(Received):
    scope: Literal["version", "case"] = "version"
    # A container (through the Docker Engine API).
    image: str | None = Field(default=None, max_length=500)
    command: list[Annotated[str, Field(max_length=4096)]] | None = Field(
        default=None, max_length=256
    )
    ports: list[Port] = Field(default_factory=list, max_length=MAX_SERVICE_PORTS)
    # A process on the member's machine (e.g. the repo's `npm run dev`): `{port}` / `PORT`
    # is the free port the runner chose for it.
    run: list[Annotated[str, Field(max_length=4096)]] | None = Field(
        default=None, min_length=1, max_length=256
    )
    cwd: Literal["repo", "case"] | None = None
    env: dict[str, Annotated[str, Field(max_length=4096)]] = Field(default_factory=dict)
    ready: ReadyProbe

    @field_validator("env")
    @classmethod
    def _env_names(cls, env: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        return check_env(env, info)

    @field_validator("image")
    @classmethod
    def _image(cls, image: str | None) -> str | None:
        if image is not None and not IMAGE_RE.fullmatch(image):
            raise ValueError(
                f"image {image!r} is not an image reference such as postgres:16 or "
                "registry.example.com/team/app:1.2"
            )
        return image

    @field_validator("ports")
    @classmethod
    def _distinct_ports(cls, ports: list[int]) -> list[int]:
        if len(set(ports)) != len(ports):
            raise ValueError("ports names the same port twice")
        return ports

    @field_validator("run")
    @classmethod
    def _program_is_named(cls, run: list[str] | None) -> list[str] | None:
        if run is not None and not run[0].strip():
            raise ValueError("run[0] must name a program")
        return run

    @model_validator(mode="after")
    def _container_or_process(self) -> ServiceSpec:
        if (self.image is None) == (self.run is None):
            raise ValueError("a service is a container (image) or a process (run), not both")
        if self.image is not None:
            self._check_container()
        else:
            self._check_process()
        return self

    def _check_container(self) -> None:
        if self.cwd is not None:
            raise ValueError("cwd is for a process service (run), not a container")
        if not self.ports:
            raise ValueError("a container service publishes at least one port (ports)")
        probed = self.ready.tcp if self.ready.tcp is not None else self.ready.port
        if probed is None:
            raise ValueError("an http probe of a container names the port it asks (port)")
        if probed not in self.ports:
            raise ValueError(f"ready probes port {probed}, which ports does not publish")

    def _check_process(self) -> None:
        if self.command is not None or self.ports:
            raise ValueError("command and ports are for a container service (image)")
        if self.cwd == "case" and self.scope != "case":
            raise ValueError("a process with cwd: case runs per case: set scope: case")

    @property
    def is_container(self) -> bool:
        return self.image is not None

    @property
    def fixed_port(self) -> int | None:
        """The port a process's probe names (it listens there, not on `{port}`)."""
        return self.ready.tcp if self.ready.tcp is not None else self.ready.port

    def probe_text(self) -> str:
        """The probe as the member reads it: `tcp :5432`, `http GET /health on :8080 → 200`."""
        ready = self.ready
        port = self.fixed_port
        where = f":{port}" if port is not None else "its {port}"
        if ready.tcp is not None:
            return f"tcp {where} within {ready.timeout_s}s"
        return (
            f"http GET {ready.http} on {where} answering {ready.status} within {ready.timeout_s}s"
        )


def check_services(services: dict[str, ServiceSpec]) -> dict[str, ServiceSpec]:
    """Refuse more than MAX_SERVICES services, or a name outside SERVICE_NAME_RE."""
    if len(services) > MAX_SERVICES:
        raise ValueError(f"a harness may declare at most {MAX_SERVICES} services")
    for name in services:
        if not SERVICE_NAME_RE.fullmatch(name):
            raise ValueError(
                f"service name {name!r}: 1-32 characters of a-z, 0-9 and '_', "
                "starting with a letter"
            )
    return services
