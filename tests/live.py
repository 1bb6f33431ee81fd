"""Real processes for end-to-end tests: daphne, the scheduler and the runner CLI."""

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

from django.db import connection

from everdict.processes import Proc, daphne_args, free_port, spawn
from everdict.processes import wait_http as wait_http_until

ROOT = Path(__file__).resolve().parent.parent
# A server that dies while starting shows this much of its log in the failure.
TAIL_LINES = 40


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


def runner_cli(
    tmp_path: Path, args: list[str], name: str = "runner", *, allow_any: bool = True, **env: Any
) -> Proc:
    """Start `python -m runnercli …` as a member would, with its own config file.

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
        }
    )
    child_env.pop("DJANGO_SETTINGS_MODULE", None)
    child_env.update({k: str(v) for k, v in env.items()})
    return spawn([sys.executable, "-m", "runnercli", *args], tmp_path / f"{name}.log", child_env)
