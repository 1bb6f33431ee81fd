"""Whether a Docker daemon answers: `GET /_ping` on the Engine API, a cheap call that needs
no docker SDK (a TLS daemon is asked through the SDK, which reads its certificates)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from urllib.parse import urlsplit

from runnercli.tasks import within

DEFAULT_HOST = "unix:///var/run/docker.sock"
PING_TIMEOUT_S = 3.0


def docker_host() -> str:
    return os.environ.get("DOCKER_HOST") or DEFAULT_HOST


async def _connect(host: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    parts = urlsplit(host)
    if parts.scheme == "unix":
        return await asyncio.open_unix_connection(parts.path)
    if parts.scheme in ("tcp", "http") and parts.hostname:
        return await asyncio.open_connection(parts.hostname, parts.port or 2375)
    raise OSError(f"DOCKER_HOST {host!r} is not a unix:// or tcp:// address this runner pings")


async def _ping(host: str) -> str | None:
    reader, writer = await _connect(host)
    try:
        writer.write(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
        await writer.drain()
        line = await reader.readline()
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    parts = line.decode("latin-1").split()
    if len(parts) >= 2 and parts[1] == "200":
        return None
    return f"the Docker daemon at {host} answered {line.decode('latin-1').strip()!r}"


async def daemon_problem(timeout_s: float = PING_TIMEOUT_S) -> str | None:
    """None when the Docker daemon answers its ping; else why not, in words."""
    host = docker_host()
    if os.environ.get("DOCKER_TLS_VERIFY"):
        return await _ping_with_sdk(host, timeout_s)
    try:
        return await within(_ping(host), timeout_s)
    except TimeoutError:
        return f"no Docker daemon answered at {host} within {timeout_s:g}s"
    except OSError as exc:
        return f"no Docker daemon answers at {host} ({exc.strerror or exc})"


async def _ping_with_sdk(host: str, timeout_s: float) -> str | None:
    """A TLS daemon: asked through the SDK, which reads the certificates' settings."""

    def ping() -> str | None:
        try:
            import docker
        except ImportError:
            return f"{host} needs TLS: install the docker SDK (pip install 'everdict[docker]')"
        try:
            docker.from_env(timeout=int(timeout_s)).ping()
        except Exception as exc:
            return f"no Docker daemon answers at {host} ({exc})"
        return None

    return await asyncio.to_thread(ping)
