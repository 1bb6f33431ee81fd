"""Real processes for end-to-end tests: daphne, the scheduler and the runner CLI; and whether a
test of several replicas can run here."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from cluster import database_url, redis_problem
from django.db import connection

from everdict.processes import Proc, daphne_args, free_port, spawn
from everdict.processes import wait_http as wait_http_until
from runnercli.console.taskdump import DUMP_SIGNAL

ROOT = Path(__file__).resolve().parent.parent
# A server that dies while starting shows this much of its log in the failure.
TAIL_LINES = 40


def server_env(**overrides: Any) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": database_url(),
            "DJANGO_SETTINGS_MODULE": "everdict.settings",
            "PYTHONUNBUFFERED": "1",
            "EVERDICT_WAKE_RECHECK_S": "0.5",
            "PASSWORD_HASHERS": "django.contrib.auth.hashers.MD5PasswordHasher,"
            "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        }
    )
    env.update({k: str(v) for k, v in overrides.items()})
    return env


def wait_http(url: str, timeout: float = 30, proc: Proc | None = None) -> None:
    """Wait until `url` answers; give up at once if `proc` (the server) has exited."""
    watch = [proc] if proc is not None else []
    wait_http_until(url, timeout_s=timeout, watch=watch, tail_lines=TAIL_LINES)


def rest(
    base_url: str, method: str, path: str, token: str, body: Any = None, timeout: float = 30
) -> tuple[int, Any]:
    """One REST call with a bearer key; returns (status, decoded JSON, raw text, or None)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{base_url}{path}",
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            raw = reply.read()
            return reply.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw) if raw else None
        except ValueError:
            return exc.code, raw.decode(errors="replace")


def scrape(base_url: str, timeout: float = 10) -> dict[str, float]:
    """A server's /metrics: each sample, named with its labels as printed, to its value."""
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=timeout) as response:
        text = response.read().decode()
    lines = (line for line in text.splitlines() if line and not line.startswith("#"))
    samples = (line.rsplit(" ", 1) for line in lines)
    return {name: float(value) for name, value in samples}


def metric(base_url: str, sample: str) -> float:
    """One sample of a server's /metrics (0 when not yet counted)."""
    return scrape(base_url).get(sample, 0.0)


def wait_metric(base_url: str, sample: str, at_least: float, timeout: float = 15) -> float:
    """Wait until a sample of a server's /metrics reaches `at_least`; return it."""
    deadline = time.monotonic() + timeout
    while (value := metric(base_url, sample)) < at_least:
        assert time.monotonic() < deadline, (
            f"{sample} is {value:g} after {timeout}s, not {at_least:g}"
        )
        time.sleep(0.05)
    return value


# A long-poll's first round that found nothing to claim, or skipped its claim because the
# process's last re-check found its owner with nothing queued.
EMPTY_ROUNDS = ('everdict_claims_total{found="no"}', 'everdict_claims_total{found="skipped"}')


class ParkedPolls:
    """Evidence from a server (its /metrics) that the long-polls started since have parked.

    A poll is counted among the process's parked polls before its first round looks at the
    queue (so a dispatch committing meanwhile still wakes it). Once that round has come back
    empty too, a job dispatched from then on can reach the poll only by waking it: a test of
    the wake-up waits for both, not for a while, before it dispatches.
    """

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.empty_rounds = self._empty_rounds(scrape(base_url))

    @staticmethod
    def _empty_rounds(samples: dict[str, float]) -> float:
        return sum(samples.get(sample, 0.0) for sample in EMPTY_ROUNDS)

    def wait(self, polls: int = 1, timeout: float = 15) -> None:
        """Wait until `polls` more first rounds came back empty and as many polls are parked."""
        deadline = time.monotonic() + timeout
        while True:
            samples = scrape(self.base_url)
            empty = self._empty_rounds(samples) - self.empty_rounds
            parked = samples.get("everdict_parked_long_polls", 0.0)
            if empty >= polls and parked >= polls:
                return
            assert time.monotonic() < deadline, (
                f"{polls} long-poll(s) not parked after {timeout}s: {empty:g} empty first"
                f" round(s) since, {parked:g} parked"
            )
            time.sleep(0.05)


class LiveServer:
    def __init__(self, proc: Proc, port: int) -> None:
        self.proc = proc
        self.port = port
        self.url = f"http://127.0.0.1:{port}"


@contextmanager
def daphne(tmp_path: Path, port: int | None = None, **env: Any) -> Iterator[LiveServer]:
    """A daphne over the test database (on `port`, or a free one), stopped after."""
    port = port or free_port()
    proc = spawn(
        daphne_args(port),
        tmp_path / f"daphne-{port}-{time.monotonic_ns()}.log",
        server_env(**env),
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz", proc=proc)
        yield LiveServer(proc, port)
    finally:
        proc.stop()


@contextmanager
def scheduler(tmp_path: Path, **env: Any) -> Iterator[Proc]:
    proc = spawn(
        [sys.executable, "manage.py", "scheduler", "--interval", "0.2"],
        tmp_path / f"scheduler-{time.monotonic_ns()}.log",
        server_env(**env),
    )
    try:
        yield proc
    finally:
        proc.stop()


# Stand-ins for the host's sleep inhibitors: each lives as long as the lock it would hold
# (`systemd-inhibit` as long as the command it runs, the runner's `cat` on a pipe;
# `caffeinate -i -w PID` as long as that process), and takes none.
STAND_IN_INHIBITORS = {
    "systemd-inhibit": '#!/bin/sh\nfor last; do :; done\nexec "$last"\n',
    "caffeinate": '#!/bin/sh\nwhile kill -0 "$3" 2>/dev/null; do sleep 0.2; done\n',
}


def sealed_host(tmp_path: Path) -> dict[str, str]:
    """The environment that seals a runner from the machine the tests run on: a power supply
    of its own, on AC (a developer's laptop on battery would otherwise pause it), and sleep
    inhibitors that take no lock, first on its PATH. A test that is about either sets its own
    `EVERDICT_POWER_SUPPLY_DIR` or `PATH` over these."""
    host = tmp_path / "sealed-host"
    if not host.exists():
        for supply, attrs in {
            "AC": {"type": "Mains", "online": "1"},
            "BAT0": {"type": "Battery", "status": "Charging", "capacity": "80"},
        }.items():
            (host / "power" / supply).mkdir(parents=True)
            for attr, value in attrs.items():
                (host / "power" / supply / attr).write_text(value + "\n")
        (host / "bin").mkdir()
        for program, body in STAND_IN_INHIBITORS.items():
            (host / "bin" / program).write_text(body)
            (host / "bin" / program).chmod(0o755)
    return {
        "EVERDICT_POWER_SUPPLY_DIR": str(host / "power"),
        "PATH": f"{host / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def runner_cli(
    tmp_path: Path, args: list[str], name: str = "runner", *, allow_any: bool = True, **env: Any
) -> Proc:
    """Start `python -m runnercli …` as a member would, with its own config file, on a host
    sealed from this machine's power supply and sleep inhibitor (`sealed_host`).

    A `run` is started with `--allow-any` (these tests are not about consent) unless
    `allow_any` is False or it names what it allows (`--allow`).
    """
    explicit = "--allow-any" in args or "--allow" in args
    if allow_any and args[:1] == ["run"] and not explicit:
        args = ["run", "--allow-any", *args[1:]]
    child_env = dict(os.environ)
    child_env.update(
        {
            "PYTHONUNBUFFERED": "1",
            "EVERDICT_RUNNER_CONFIG": str(tmp_path / f"{name}.json"),
            "NO_COLOR": "1",
            **sealed_host(tmp_path),
        }
    )
    child_env.pop("DJANGO_SETTINGS_MODULE", None)
    child_env.update({k: str(v) for k, v in env.items()})
    log = tmp_path / f"{name}.log"
    return spawn(
        [sys.executable, "-m", "runnercli", *args], log, child_env, dump_signal=DUMP_SIGNAL
    )


def require_postgres_and_redis(redis_url: str) -> None:
    """Skip the calling test unless it runs on PostgreSQL with Redis reachable.

    A multi-replica deployment shares PostgreSQL (the queue) and Redis (channel layer and
    cache). With REQUIRE_REDIS set (CI) an unreachable Redis fails instead of skipping.
    """
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL: several replicas share the queue through it")
    problem = redis_problem(redis_url)
    if problem is None:
        return
    if os.environ.get("REQUIRE_REDIS", "").strip() not in ("", "0"):
        pytest.fail(f"REQUIRE_REDIS is set but {problem}")
    pytest.skip(f"needs Redis: {problem}")
