"""Long-poll wake latency: dispatch commit → the runner has the job, over /mcp.

One idle runner long-polls `lease_job` on a real daphne; the benchmark dispatches one-case
runs one at a time through the REST API (the path a member or agent uses) and measures,
for each, the time from the dispatch's commit to the runner holding the job. Beside it,
the round trip of a trivial tool call (`hello`) on the same session, in the same run.

The commit time is the dispatch's own "Dispatched …" run event, stamped inside the
dispatching transaction just before it commits: the figure is, if anything, a little
high. Parked polls re-check the queue only every 30 s here, so every job is delivered by
the wake-up itself (PostgreSQL NOTIFY, or the in-process hub on SQLite).

    python bench/lease_latency.py [--jobs 200]                  # a scratch SQLite file
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/x python bench/lease_latency.py
                                                                # a scratch PostgreSQL database

Not a test: it prints figures. It creates (and removes) its own scratch database.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WAIT_MS = 30_000
RECHECK_S = "30"


@dataclass
class Figures:
    wake_s: list[float] = field(default_factory=list)
    hello_s: list[float] = field(default_factory=list)
    dispatch_s: list[float] = field(default_factory=list)


# ------------------------------------------------------------------ scratch database


@contextmanager
def scratch_database(base_url: str | None, workdir: Path) -> Iterator[str]:
    """Yield the URL of an empty database of the same kind as `base_url`; drop it after."""
    if not base_url or base_url.startswith("sqlite"):
        yield f"sqlite:///{workdir / 'bench.sqlite3'}"
        return
    import psycopg

    parts = urlsplit(base_url)
    name = f"everdict_bench_{os.getpid()}"
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(parts._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def seed(database_url: str) -> tuple[str, str, int]:
    """Migrate and create a member, a workspace, a one-case suite and a runner."""
    os.environ["DATABASE_URL"] = database_url
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "everdict.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from everdict.services import api_key_create
    from runners.services import runner_pair
    from scorecards.catalog import dataset_create, harness_create
    from scorecards.workspaces import workspace_create

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="bench")
    workspace_create(user=user, slug="bench", name="Bench")
    spec = {"command": ["echo", "{input.text}"], "output": "text", "grader": {"type": "exact"}}
    harness_create(user=user, workspace_slug="bench", name="echo", spec=spec)
    dataset_create(
        user=user,
        workspace_slug="bench",
        name="one",
        cases=[{"key": "c0", "input": {"text": "hi"}, "expected": "hi"}],
    )
    paired = runner_pair(owner=user, label="bench", capabilities=["python"])
    return api_key_create(user=user).key, paired.token, paired.runner.pk


def dispatch_times(run_ids: list[int]) -> dict[int, float]:
    """Each run's dispatch commit, as the wall-clock stamp of its "Dispatched" event."""
    from scorecards.models import RunEvent

    events = RunEvent.objects.filter(run_id__in=run_ids, message__startswith="Dispatched")
    return {e.run_id: e.at.timestamp() for e in events}


# ------------------------------------------------------------------------- server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def daphne(database_url: str, workdir: Path) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": "everdict.settings",
        "EVERDICT_WAKE_RECHECK_S": RECHECK_S,
        "LOG_LEVEL": "WARNING",
    }
    log = (workdir / "daphne.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "everdict.asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/healthz", timeout=2)
                break
            except (urllib.error.URLError, OSError) as exc:
                if time.monotonic() > deadline or proc.poll() is not None:
                    log_path = workdir / "daphne.log"
                    raise RuntimeError(f"daphne did not start; see {log_path}") from exc
                time.sleep(0.1)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
        log.close()


# -------------------------------------------------------------------------- clients


async def dispatch_rest(http: Any, runner_id: int) -> int:
    response = await http.post(
        "/api/workspaces/bench/runs",
        json={"harness": "echo", "dataset": "one", "runtime": f"self:{runner_id}"},
    )
    response.raise_for_status()
    return int(response.json()["id"])


def dispatch_here(runner_id: int) -> int:
    """Dispatch from this process: on PostgreSQL the NOTIFY crosses processes, as it does
    between replicas."""
    from django.contrib.auth import get_user_model

    from scorecards.services import run_start

    user = get_user_model().objects.get(username="bench")
    run = run_start(
        user=user,
        workspace_slug="bench",
        harness="echo",
        dataset="one",
        runtime=f"self:{runner_id}",
    )
    return int(run.pk)


async def measure(
    url: str, api_key: str, token: str, runner_id: int, jobs: int, warmup: int, via: str
) -> tuple[Figures, list[int], dict[int, float]]:
    import httpx2
    from asgiref.sync import sync_to_async
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    figures = Figures()
    received: dict[int, float] = {}
    run_ids: list[int] = []
    timeout = httpx2.Timeout(10, read=WAIT_MS / 1000 + 20)
    runner_http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=timeout)
    rest_http = httpx2.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {api_key}"}, timeout=timeout
    )
    async with (
        runner_http,
        rest_http,
        Client(streamable_http_client(f"{url}/mcp", http_client=runner_http)) as runner,
    ):
        await runner.list_tools()
        for i in range(warmup + jobs):
            measured = i >= warmup
            began = time.perf_counter()
            hello = await runner.call_tool("hello", {"protocol": 1, "status": "idle"})
            if measured:
                figures.hello_s.append(time.perf_counter() - began)
            assert not hello.is_error, hello

            poll = asyncio.create_task(
                runner.call_tool("lease_job", {"protocol": 1, "wait_ms": WAIT_MS, "status": "idle"})
            )
            await asyncio.sleep(0.03)  # the poll reaches the server and parks on an empty queue
            began = time.perf_counter()
            if via == "rest":
                run_id = await dispatch_rest(rest_http, runner_id)
            else:
                run_id = await sync_to_async(dispatch_here)(runner_id)
            if measured:
                figures.dispatch_s.append(time.perf_counter() - began)
            leased = await poll
            got_at = time.time()
            job = (leased.structured_content or {}).get("job")
            if job is None:
                raise RuntimeError(f"the poll answered without the job: {leased}")
            if measured:
                run_ids.append(run_id)
                received[run_id] = got_at
            submitted = await runner.call_tool(
                "submit_job_result",
                {
                    "job_id": job["job_id"],
                    "lease_epoch": job["lease_epoch"],
                    "result": {"status": "completed", "exit_code": 0, "output": "hi\n"},
                },
            )
            assert not submitted.is_error, submitted
    return figures, run_ids, received


def pct(values: list[float], p: int) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def report(label: str, values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return (
        f"{label:<42} p50 {pct(ms, 50):7.2f} ms   p99 {pct(ms, 99):7.2f} ms   "
        f"max {max(ms):7.2f} ms   (n={len(ms)})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200, help="measured jobs (default 200)")
    parser.add_argument("--warmup", type=int, default=10, help="unmeasured jobs first")
    parser.add_argument(
        "--dispatch",
        choices=("rest", "process"),
        default="rest",
        help="rest: POST /api/workspaces/…/runs to the same server (default); process: "
        "dispatch from this process (PostgreSQL only: the wake-up crosses processes)",
    )
    args = parser.parse_args()

    base_url = os.environ.get("DATABASE_URL")
    if args.dispatch == "process" and not (base_url or "").startswith("postgres"):
        parser.error("--dispatch process needs DATABASE_URL=postgres://… (SQLite wakes in-process)")
    with tempfile.TemporaryDirectory(prefix="everdict-bench-") as tmp:
        workdir = Path(tmp)
        with scratch_database(base_url, workdir) as database_url:
            api_key, token, runner_id = seed(database_url)
            with daphne(database_url, workdir) as url:
                figures, run_ids, received = asyncio.run(
                    measure(url, api_key, token, runner_id, args.jobs, args.warmup, args.dispatch)
                )
            committed = dispatch_times(run_ids)
            figures.wake_s = [received[r] - committed[r] for r in run_ids]
            from django.db import connection

            engine = connection.vendor
            connection.close()

    print(
        f"lease wake latency over /mcp — {engine}, {args.jobs} jobs, one idle long-polling "
        f"runner, dispatched via {args.dispatch}"
    )
    print(report("dispatch commit → runner has the job", figures.wake_s))
    print(report("bare tool call round trip (hello)", figures.hello_s))
    print(report(f"dispatch call ({args.dispatch})", figures.dispatch_s))


if __name__ == "__main__":
    main()
