"""Readiness: a service is up when its probe answers — a TCP connect, or an HTTP GET answering
the status asked — before the probe's timeout, while the service still runs."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable

from runnercli.case.services.ports import HOST
from runnercli.protocol import ReadyProbe
from runnercli.tasks import within

ATTEMPT_TIMEOUT_S = 2.0
FIRST_PAUSE_S = 0.02
MAX_PAUSE_S = 0.25
# How long a TCP probe waits to see a port published by Docker close at once: its proxy
# accepts a connection even while nothing in the container listens, then closes it.
PROXY_CLOSE_S = 0.15

# None while the service runs; else how it ended ("exited with status 1").
Alive = Callable[[], Awaitable[str | None]]


class NotReady(Exception):
    """The probe did not answer in time, or the service ended while it waited."""


async def _http_status(port: int, path: str) -> int | None:
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        request = f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\nConnection: close\r\n\r\n"
        writer.write(request.encode("ascii", errors="replace"))
        await writer.drain()
        line = await reader.readline()
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    parts = line.decode("latin-1").split()
    if len(parts) >= 2 and parts[0].startswith("HTTP/") and parts[1].isdigit():
        return int(parts[1])
    return None


async def _tcp_open(port: int, *, proxied: bool) -> bool:
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        if not proxied:
            return True
        try:
            first = await within(reader.read(1), PROXY_CLOSE_S)
        except TimeoutError:
            return True  # open and silent: a server waiting for its client
        return first != b""  # closed at once: the proxy, with nothing behind it
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def probe_once(probe: ReadyProbe, port: int, *, proxied: bool = False) -> str | None:
    """None when the probe answers as asked; else what it got."""
    try:
        if probe.http is not None:
            status = await within(_http_status(port, probe.http), ATTEMPT_TIMEOUT_S)
            return None if status == probe.status else f"answered {status or 'no HTTP status'}"
        opened = await within(_tcp_open(port, proxied=proxied), ATTEMPT_TIMEOUT_S)
        return None if opened else "the connection was closed at once"
    except TimeoutError:
        return "no answer"
    except OSError as exc:
        return exc.strerror or type(exc).__name__


async def wait_ready(
    probe: ReadyProbe,
    port: int,
    *,
    alive: Alive,
    proxied: bool = False,
    timeout_s: float | None = None,
) -> float:
    """Probe until it answers; return the seconds it took. Raise NotReady when `timeout_s`
    (the probe's own by default) passes, or when the service ends meanwhile."""
    began = time.monotonic()
    deadline = began + (probe.timeout_s if timeout_s is None else timeout_s)
    pause = FIRST_PAUSE_S
    last = "no answer"
    while True:
        if (ended := await alive()) is not None:
            raise NotReady(f"it {ended} before its probe answered (last: {last})")
        got = await probe_once(probe, port, proxied=proxied)
        if got is None:
            return time.monotonic() - began
        last = got
        if time.monotonic() >= deadline:
            raise NotReady(f"its probe did not answer as asked in time (last: {last})")
        await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, MAX_PAUSE_S)
