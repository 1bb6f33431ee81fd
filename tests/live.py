"""Real processes for end-to-end tests: daphne, the scheduler and the runner CLI."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_database_url() -> str:
    """The URL of the database the test process is using, for the child processes."""
    settings_dict = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{settings_dict['NAME']}"
    user = settings_dict.get("USER") or "postgres"
    password = settings_dict.get("PASSWORD") or ""
    auth = f"{user}:{password}@" if password else f"{user}@"
    host = settings_dict.get("HOST") or "127.0.0.1"
    port = settings_dict.get("PORT") or 5432
    return f"postgres://{auth}{host}:{port}/{settings_dict['NAME']}"


def server_env(**overrides: Any) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "DATABASE_URL": test_database_url(),
            "DJANGO_SETTINGS_MODULE": "everdict.settings",
            "PYTHONUNBUFFERED": "1",
            "EVERDICT_WAKE_RECHECK_S": "0.5",
            "PASSWORD_HASHERS": "django.contrib.auth.hashers.MD5PasswordHasher,"
            "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        }
    )
    env.update({k: str(v) for k, v in overrides.items()})
    return env


class Proc:
    def __init__(self, popen: subprocess.Popen[bytes], log: Path) -> None:
        self.popen = popen
        self.log = log

    @property
    def pid(self) -> int:
        return self.popen.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 10) -> int | None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(5)
        return self.popen.returncode


def spawn(args: list[str], log: Path, env: dict[str, str], cwd: Path = ROOT) -> Proc:
    handle = log.open("wb")
    popen = subprocess.Popen(
        args, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
    )
    return Proc(popen, log)


def wait_http(url: str, timeout: float = 30, proc: Proc | None = None) -> None:
    """Wait until `url` answers; give up at once if `proc` (the server) has exited."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return
        except OSError as exc:
            if proc is not None and proc.popen.poll() is not None:
                raise RuntimeError(f"{url}: the process exited:\n{proc.output()[-3000:]}") from exc
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not answer within {timeout}s") from exc
            time.sleep(0.1)


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


def daphne_args(port: int) -> list[str]:
    """The command that serves the project on a loopback port, as in production."""
    return [
        *(sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)),
        "everdict.asgi:application",
    ]


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


def runner_cli(tmp_path: Path, args: list[str], name: str = "runner", **env: Any) -> Proc:
    """Start `python -m runnercli …` as a member would, with its own config file."""
    child_env = dict(os.environ)
    child_env.update(
        {
            "PYTHONUNBUFFERED": "1",
            "EVERDICT_RUNNER_CONFIG": str(tmp_path / f"{name}.json"),
            "NO_COLOR": "1",
        }
    )
    child_env.pop("DJANGO_SETTINGS_MODULE", None)
    child_env.update({k: str(v) for k, v in env.items()})
    return spawn([sys.executable, "-m", "runnercli", *args], tmp_path / f"{name}.log", child_env)
