"""The server under test: a daphne process over the scratch database."""

from __future__ import annotations

import argparse
import os
import resource
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from databases import SERVER_ENV, Scratch

from everdict.processes import Proc, daphne_args, free_port, spawn, wait_http


def server_env(args: argparse.Namespace) -> dict[str, str]:
    """The --server-env pairs as a dict."""
    pairs = {}
    for item in args.server_env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"--server-env wants NAME=VALUE, got {item!r}")
        pairs[name] = value
    return pairs


def raise_open_files(wanted: int) -> int:
    """Raise this process's file-descriptor limit (children inherit it); return the new one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Server(Proc):
    """A daphne process serving the whole application (pages, /api/, /mcp)."""

    def __init__(self, proc: Proc, port: int) -> None:
        super().__init__(proc.popen, proc.log)
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    def process(self) -> Any:
        import psutil

        return psutil.Process(self.popen.pid)

    def rss_bytes(self) -> int:
        return int(self.process().memory_info().rss)

    def cpu_seconds(self) -> float:
        times = self.process().cpu_times()
        return float(times.user + times.system)


class RssPeak:
    """The highest resident set size of a process, sampled every few milliseconds until
    stopped."""

    def __init__(self, server: Any, every_s: float = 0.002) -> None:
        import threading

        self.server = server
        self.peak = server.rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(every_s,), daemon=True)
        self._thread.start()

    def _sample(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self.peak = max(self.peak, self.server.rss_bytes())

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


@contextmanager
def daphne(scratch: Scratch, name: str = "daphne", **env: Any) -> Iterator[Server]:
    """Start daphne on a free loopback port over the scratch database; stop it after."""
    port = free_port()
    child_env = {**os.environ, **SERVER_ENV, "DATABASE_URL": scratch.url}
    child_env.update({k: str(v) for k, v in env.items()})
    server = Server(
        spawn(daphne_args(port), scratch.workdir / f"{name}-{port}.log", child_env), port
    )
    try:
        wait_http(f"{server.url}/healthz", timeout_s=60, watch=[server])
        yield server
    finally:
        server.stop(grace_s=15)
