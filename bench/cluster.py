"""A production-shaped deployment on one machine: several daphne replicas and scheduler
workers over one PostgreSQL database and one Redis, and runner CLI processes pointed at them.

Every process is real and is started, killed (`kill -9`), paused and restarted the way an
operator or a crash would: a replica comes back on the port it had, a runner with the
token it had. The processes run over the database this process's Django is connected to
(a scratch database in `bench/soak.py`, the test database under pytest: `tests/test_replicas.py`
and `tests/test_soak.py` use it too).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from everdict.processes import Proc, daphne_args, free_port, spawn, wait_http

# The Redis server the multi-replica tests use (a database number is appended per suite).
DEFAULT_REDIS = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379").rstrip("/")


# ------------------------------------------------------------------ prerequisites


def redis_problem(url: str) -> str | None:
    """Why Redis at `url` cannot be used, or None when it answers."""
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:
        return f"Redis at {url} is unreachable ({type(exc).__name__}: {exc})"
    return None


# --------------------------------------------------------------------------- HTTP


def ok(base_url: str, method: str, path: str, token: str, body: Any = None) -> Any:
    """One REST call with a bearer key; its decoded JSON reply, or RuntimeError for a status
    of 300 or more."""
    request = urllib.request.Request(
        f"{base_url}{path}",
        data=None if body is None else json.dumps(body).encode(),
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            raw = reply.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")
        raise RuntimeError(f"{method} {path} answered {exc.code}: {detail}") from exc
    return json.loads(raw) if raw else None


def scrape(base_url: str, timeout: float = 5) -> str | None:
    """The replica's /metrics text (loopback is allowed by default), or None if it is down."""
    try:
        with urllib.request.urlopen(f"{base_url}/metrics", timeout=timeout) as reply:
            return str(reply.read().decode())
    except OSError:
        return None


def metric_sum(text: str, name: str) -> dict[str, float]:
    """Sum the samples of one metric family by their label set (e.g. `call="lease_job",…`)."""
    found: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(name):
            continue
        head, _, value = line.rpartition(" ")
        rest_of_name = head[len(name) :]
        if rest_of_name and not rest_of_name.startswith("{"):
            continue  # another family sharing the prefix
        labels = rest_of_name.strip("{}")
        found[labels] = found.get(labels, 0.0) + float(value)
    return found


# ---------------------------------------------------------------------- processes


def database_url() -> str:
    """The URL of the database this process's Django is connected to, for its children."""
    from django.db import connection

    settings_dict = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings_dict['NAME']}"
    user = settings_dict.get("USER") or "postgres"
    password = settings_dict.get("PASSWORD") or ""
    auth = f"{user}:{password}@" if password else f"{user}@"
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{auth}{host}:{port}/{settings_dict['NAME']}"


def server_env(env: Mapping[str, Any]) -> dict[str, str]:
    """The environment of the cluster's servers and schedulers: this process's database, and
    `env` over it."""
    child_env = dict(os.environ)
    child_env.update(
        {
            "DATABASE_URL": database_url(),
            "DJANGO_SETTINGS_MODULE": "everdict.settings",
            "PYTHONUNBUFFERED": "1",
            "EVERDICT_WAKE_RECHECK_S": "0.5",
        }
    )
    child_env.update({k: str(v) for k, v in env.items()})
    return child_env


@dataclass
class Replica:
    index: int
    port: int
    proc: Proc | None = None
    incarnation: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class RunnerProcess:
    """A paired runner and the `python -m runnercli run` process currently serving it."""

    runner_id: int
    token: str
    label: str
    server: str
    max_concurrent: int
    wait_ms: int
    proc: Proc | None = None
    incarnation: int = 0
    # Killed on purpose and not restarted yet, or revoked for good: an exit is expected.
    down: bool = False
    retired: bool = False
    exits: list[int] = field(default_factory=list)


class Cluster:
    """Replicas, schedulers and runners over this process's database.

    `env` is given to every server process (replicas and schedulers): the settings they
    must share (REDIS_URL, SECRET_KEY, timeouts).
    """

    def __init__(
        self,
        workdir: Path,
        *,
        replicas: int = 2,
        schedulers: int = 2,
        env: Mapping[str, Any] | None = None,
        scheduler_interval: float = 0.2,
    ) -> None:
        self.workdir = workdir
        self.env = server_env(env or {})
        self.replicas = [Replica(index=i, port=free_port()) for i in range(replicas)]
        self.scheduler_count = schedulers
        self.schedulers: list[Proc | None] = [None] * schedulers
        self.scheduler_interval = scheduler_interval
        self.runners: list[RunnerProcess] = []
        self._lock = threading.Lock()

    def __enter__(self) -> Cluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        # Replicas start side by side: each spends most of its start-up importing Django.
        for replica in self.replicas:
            self._spawn_replica(replica)
        for replica in self.replicas:
            assert replica.proc is not None
            wait_http(f"{replica.url}/healthz", timeout_s=60, watch=[replica.proc], tail_lines=40)
        for i in range(self.scheduler_count):
            self.start_scheduler(i)

    def stop(self) -> None:
        # Every process is told at once, then waited for: twenty runners finishing their
        # last long-poll one after the other would take minutes.
        procs = [r.proc for r in self.runners if r.proc is not None]
        procs += [p for p in self.schedulers if p is not None]
        procs += [r.proc for r in self.replicas if r.proc is not None]
        live = [p for p in procs if p.popen.poll() is None]
        for proc in live:
            proc.signal_group(signal.SIGCONT)
            proc.signal_group(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in live:
            if proc.wait(max(0.1, deadline - time.monotonic())) is None:
                proc.stop(signal.SIGKILL)

    # ---- replicas

    def _spawn_replica(self, replica: Replica) -> None:
        replica.incarnation += 1
        replica.proc = spawn(
            daphne_args(replica.port),
            self.workdir / f"replica-{replica.index}-{replica.incarnation}.log",
            self.env,
        )

    def kill_replica(self, index: int) -> None:
        replica = self.replicas[index]
        if replica.proc is not None:
            replica.proc.stop(signal.SIGKILL)

    def start_replica(self, index: int) -> None:
        """Start the replica again on the port it had (the runners pointed at it come back)."""
        replica = self.replicas[index]
        deadline = time.monotonic() + 30
        while True:
            self._spawn_replica(replica)
            assert replica.proc is not None
            try:
                wait_http(
                    f"{replica.url}/healthz", timeout_s=60, watch=[replica.proc], tail_lines=40
                )
                return
            except RuntimeError:
                # The port may linger for a moment after a kill; try again.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    # ---- schedulers

    def start_scheduler(self, index: int) -> None:
        self.schedulers[index] = spawn(
            [sys.executable, "manage.py", "scheduler", "--interval", str(self.scheduler_interval)],
            self.workdir / f"scheduler-{index}-{time.monotonic_ns()}.log",
            self.env,
        )

    def kill_scheduler(self, index: int) -> None:
        proc = self.schedulers[index]
        if proc is not None:
            proc.stop(signal.SIGKILL)

    # ---- runners

    def add_runner(
        self,
        *,
        runner_id: int,
        token: str,
        label: str,
        server: str,
        max_concurrent: int = 1,
        wait_ms: int = 10_000,
    ) -> RunnerProcess:
        runner = RunnerProcess(
            runner_id=runner_id,
            token=token,
            label=label,
            server=server,
            max_concurrent=max_concurrent,
            wait_ms=wait_ms,
        )
        with self._lock:
            self.runners.append(runner)
        self.start_runner(runner)
        return runner

    def start_runner(self, runner: RunnerProcess) -> None:
        """Start `python -m runnercli run` for the runner, as its member would (a config file
        of its own), allowing any harness: consent is not what a cluster exercises."""
        runner.incarnation += 1
        name = f"{runner.label}-{runner.incarnation}"
        child_env = dict(os.environ)
        child_env.pop("DJANGO_SETTINGS_MODULE", None)
        child_env.update(
            {
                "PYTHONUNBUFFERED": "1",
                "EVERDICT_RUNNER_CONFIG": str(self.workdir / f"{name}.json"),
                "NO_COLOR": "1",
            }
        )
        args = ["run", "--allow-any", "--server", runner.server, "--token", runner.token]
        args += ["--max-concurrent", str(runner.max_concurrent), "--wait-ms", str(runner.wait_ms)]
        runner.proc = spawn(
            [sys.executable, "-m", "runnercli", *args], self.workdir / f"{name}.log", child_env
        )
        # Up only once its new process is in place: the watcher (`exited_runners`) must not
        # see the killed one's exit as the new runner's.
        runner.down = False

    def kill_runner(self, runner: RunnerProcess) -> None:
        """`kill -9` the runner and the cases it is running."""
        runner.down = True
        if runner.proc is not None:
            runner.proc.signal_group(signal.SIGKILL)
            runner.exits.append(runner.proc.popen.wait(10))

    def live_runners(self) -> list[RunnerProcess]:
        with self._lock:
            return [r for r in self.runners if not r.retired]

    def exited_runners(self) -> list[tuple[RunnerProcess, int]]:
        """Runners whose process ended on its own (not killed here), with the exit code."""
        found = []
        for runner in self.live_runners():
            if (
                not runner.down
                and runner.proc is not None
                and (code := runner.proc.popen.poll()) is not None
            ):
                found.append((runner, code))
        return found
