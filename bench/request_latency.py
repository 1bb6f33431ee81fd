"""What one API request costs through the server: starting a 1-case run and listing two
runners, each beside `GET /healthz` on the same server in the same run.

Through a daphne over a scratch database (PostgreSQL by default, pooled as deployed): a few
hundred sequential requests each of `GET /healthz` (the baseline: the server's floor),
`GET /api/runners` (two rows) and `POST /api/workspaces/<slug>/runs` (a 1-case run), API key
auth, after a warm-up; p50/p90/p99 of each and the ratio of its p50 to the baseline's.
The server's CPU per request of each (its process's CPU time over each request's rounds).
In this process, on the same database: the SQL statements each request runs and the view's
own time (Django's test client, the same middleware and view, no network); on PostgreSQL, a
pooled connection's checkout and return, checked by its socket beside Django's own check.
Targets: the run start's p50 at most 3x /healthz's; the runner list's at most 1.5x.

    .venv/bin/python bench/request_latency.py [--requests 300] [--warmup 30] [--sqlite]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from databases import add_database_arguments, pooled_settings, scratch_database
from report import Summary, finish, machine_line
from seeding import pair_runners, seed_member, seed_suite
from server_profile import ServerProfile
from servers import daphne, server_env
from stats import pct

SUITE = "one"
START = {"harness": SUITE, "dataset": SUITE, "runtime": "self:any"}
TARGETS = {"runners": 1.5, "start": 3.0}


def sequential(call: Callable[[], Any], n: int, warmup: int) -> list[float]:
    """Milliseconds of `n` calls made one after another, after `warmup` untimed ones."""
    for _ in range(warmup):
        call()
    took = []
    for _ in range(n):
        began = time.perf_counter()
        call()
        took.append((time.perf_counter() - began) * 1000)
    return took


def through_server(
    server: Any, member: Any, n: int, warmup: int
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Milliseconds of each request, and the server's CPU milliseconds per request of each."""
    import httpx2

    url = server.url
    auth = {"Authorization": f"Bearer {member.api_key}"}
    with httpx2.Client(base_url=url, headers=auth, timeout=60) as client:

        def healthz() -> None:
            client.get("/healthz").raise_for_status()

        def runners() -> None:
            reply = client.get("/api/runners")
            reply.raise_for_status()
            assert len(reply.json()) == 2, reply.text

        def start() -> None:
            reply = client.post(f"/api/workspaces/{member.slug}/runs", json=START)
            assert reply.status_code == 201, reply.text

        # Interleaved rounds, so a noisy neighbour slows all three alike.
        samples: dict[str, list[float]] = {"healthz": [], "runners": [], "start": []}
        cpu = dict.fromkeys(samples, 0.0)
        calls = {"healthz": healthz, "runners": runners, "start": start}
        for call in calls.values():
            sequential(call, 0, warmup)
        rounds = 10
        for r in range(rounds):
            size = n // rounds + (1 if r < n % rounds else 0)
            for name, call in calls.items():
                began = server.cpu_seconds()
                samples[name] += sequential(call, size, 0)
                cpu[name] += server.cpu_seconds() - began
    return samples, {name: spent * 1000 / n for name, spent in cpu.items()}


def in_process(member: Any, repeat: int, *, verbose: bool) -> dict[str, tuple[int, float]]:
    """(SQL statements, median view milliseconds) of each request, in this process."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {member.api_key}")
    requests: dict[str, Callable[[], Any]] = {
        "healthz": lambda: client.get("/healthz"),
        "runners": lambda: client.get("/api/runners"),
        "start": lambda: client.post(
            f"/api/workspaces/{member.slug}/runs", START, content_type="application/json"
        ),
    }
    figures = {}
    for name, request in requests.items():
        request()  # warm
        with CaptureQueriesContext(connection) as queries:
            reply = request()
        assert reply.status_code in (200, 201), (name, reply.status_code, reply.content[:500])
        statements = [query["sql"] for query in queries.captured_queries]
        if verbose:
            print(f"SQL of one {name} request, in process:")
            for sql in statements:
                print(f"    {sql[:150]}")
        took = sequential(request, repeat, 0)
        figures[name] = (len(statements), statistics.median(took))
    return figures


def pool_checkouts(repeat: int = 2000) -> tuple[float, float] | None:
    """Microseconds of a pooled connection's checkout and return, with the pool's check by
    its socket (`core.pooling`) and with Django's own (an empty query each time), on
    PostgreSQL; None elsewhere."""
    from django.db import connection
    from django.db.backends.postgresql.base import DatabaseWrapper as DjangoWrapper

    from core.postgresql.base import DatabaseWrapper

    if connection.vendor != "postgresql":
        return None
    settings_dict = pooled_settings(connection.settings_dict, {"min_size": 1, "max_size": 1})
    figures = []
    for wrapper_class in (DatabaseWrapper, DjangoWrapper):
        wrapper: Any = wrapper_class(settings_dict, alias=f"bench-{wrapper_class.__module__}")
        try:
            wrapper.ensure_connection()
            wrapper.close()
            began = time.perf_counter()
            for _ in range(repeat):
                wrapper.ensure_connection()
                wrapper.close()
            figures.append((time.perf_counter() - began) * 1e6 / repeat)
        finally:
            wrapper.close_pool()
    return figures[0], figures[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300, help="timed requests of each (300)")
    parser.add_argument("--warmup", type=int, default=30, help="untimed requests first (30)")
    parser.add_argument("--show-sql", action="store_true", help="print each request's SQL")
    parser.add_argument(
        "--profile", action="store_true", help="sample the server with py-spy while it answers"
    )
    add_database_arguments(parser)
    args = parser.parse_args()

    summary = Summary("request latency through the server, beside GET /healthz")
    with scratch_database(args) as scratch:
        print(f"request_latency — {machine_line(scratch)}")
        member = seed_member()
        seed_suite(member, name=SUITE, cases=1)
        pair_runners(member.user, 2)
        local = in_process(member, max(5, args.requests // 10), verbose=args.show_sql)
        checkouts = pool_checkouts()
        with daphne(scratch, **server_env(args)) as server:
            spy = None
            if args.profile:
                spy = ServerProfile(server.pid, scratch.workdir / "server.spy")
            samples, cpu = through_server(server, member, args.requests, args.warmup)
            if spy is not None:
                print(spy.stop())
    base = pct(samples["healthz"], 50)
    for name, label in (
        ("runners", "GET /api/runners (2 rows)"),
        ("start", "POST /api/workspaces/<slug>/runs (1 case)"),
    ):
        values = samples[name]
        p50 = pct(values, 50)
        statements, view_ms = local[name]
        summary.add(
            benchmark="request_latency",
            figure=f"{label} p50 / p90 / p99",
            value=f"{p50:.1f} / {pct(values, 90):.1f} / {pct(values, 99):.1f} ms",
            baseline=(
                f"GET /healthz {base:.1f} / {pct(samples['healthz'], 90):.1f} / "
                f"{pct(samples['healthz'], 99):.1f} ms"
            ),
            ratio=f"{p50 / base:.2f}x",
            target=f"<= {TARGETS[name]}x",
            met=p50 <= TARGETS[name] * base,
        )
        summary.notes.append(
            f"{label}: {statements} SQL statements, {view_ms:.1f} ms in process "
            f"(GET /healthz: {local['healthz'][0]} statements, {local['healthz'][1]:.1f} ms); "
            f"server CPU {cpu[name]:.2f} ms a request (GET /healthz: {cpu['healthz']:.2f} ms)"
        )
    if checkouts is not None:
        summary.notes.append(
            f"a pooled connection's checkout and return, in process: {checkouts[0]:.0f} µs "
            f"checked by its socket, {checkouts[1]:.0f} µs with Django's empty query"
        )
    summary.notes.append(
        f"{args.requests} sequential requests of each, interleaved in 10 rounds, after "
        f"{args.warmup} untimed ones; one keep-alive connection"
    )
    finish(summary, args)


if __name__ == "__main__":
    main()
