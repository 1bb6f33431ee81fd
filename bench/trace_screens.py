"""Watching cases work: what running cases' screens and traces cost the server, and how fast
the case page of a long trace opens.

- Load: N running cases (25), leased by one runner, each sending a frame a second (a 48 KiB
  PNG, each one distinct) and 10 trace events a second (in calls every quarter second, as
  the runner's Trace stage sends them), through the runner's own client, to one daphne for
  `--seconds` (60). Server CPU per frame and per event (each measured on its own first, then
  all together), beside a `hello` on the same server in the same run; the calls' p50 / p99.
- Page: the case page of a trace of `--events` (10,000) events in headless chromium: bytes
  received and time until the first timeline row is painted, beside the same page of a
  10-event trace. Targets: under 200 KiB and 300 ms.

    .venv/bin/python bench/trace_screens.py [--cases 25] [--seconds 60] [--sqlite]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from databases import add_database_arguments, scratch_database
from report import Summary, finish, machine_line
from seeding import pair_runners, seed_member, seed_suite
from servers import Server, daphne, server_env
from stats import pct
from trace_load import Load, screen_base
from trace_page import can_log_in, chromium, median, page_loads, seed_trace

PAGE_TARGET_KIB, PAGE_TARGET_MS = 200, 300


async def cpu_of(server: Server, work: Any) -> float:
    before = server.cpu_seconds()
    await work
    return server.cpu_seconds() - before


async def measure_load(server: Server, token: str, args: argparse.Namespace) -> dict[str, Any]:
    from runnercli.client import RunnerClient

    async with RunnerClient(server.url, token, slots=args.cases) as client:
        await client.hello(capabilities=["python"])
        batch = await client.lease_job(
            wait_ms=0, capabilities=["python"], status="bench", max_jobs=args.cases
        )
        leases = [(g.lease.job_id, g.lease.lease_epoch) for g in batch.grants()]
        assert len(leases) == args.cases, f"leased {len(leases)} of {args.cases}"

        async def hellos() -> None:
            for _ in range(args.hellos):
                await client.hello(capabilities=["python"])

        await hellos()  # warm
        hello_s = await cpu_of(server, hellos()) / args.hellos
        load = Load(client, leases, screen_base())
        load.events_per_s = 0
        frames_cpu = await cpu_of(server, load.run(args.phase_seconds))
        per_frame = frames_cpu / max(1, load.frames_sent)
        load.frames_per_s, load.events_per_s = 0, 10
        events_cpu = await cpu_of(server, load.run(args.phase_seconds))
        per_event = events_cpu / max(1, load.events_sent)
        load.frames_per_s = 1
        began, client_began = time.monotonic(), time.process_time()
        mixed_cpu = await cpu_of(server, load.run(args.seconds))
        took = time.monotonic() - began
        client_cpu = time.process_time() - client_began
    return {
        "hello_ms": hello_s * 1000,
        "frame_ms": per_frame * 1000,
        "event_ms": per_event * 1000,
        "mixed_core": mixed_cpu / took,
        "frames": load.frames_sent,
        "events": load.events_sent,
        "screens": load.screens,
        "traces": load.traces,
        "seconds": took,
        "client_core": client_cpu / took,
    }


def cpu_rows(summary: Summary, found: dict[str, Any], cases: int) -> None:
    hello = found["hello_ms"]
    for figure, key in (("server CPU per frame", "frame_ms"), ("server CPU per event", "event_ms")):
        summary.add(
            benchmark="trace_screens",
            figure=figure,
            value=f"{found[key]:.2f} ms",
            baseline=f"hello {hello:.2f} ms",
            ratio=f"{found[key] / hello:.2f}x",
            target="",
        )
    screens, traces = found["screens"], found["traces"]
    summary.add(
        benchmark="trace_screens",
        figure=f"{cases} cases, 1 frame/s + 10 events/s each: server CPU",
        value=f"{found['mixed_core'] * 100:.0f}% of a core",
        baseline=f"{found['frames']} frames, {found['events']} events in {found['seconds']:.0f} s",
        ratio="",
        target="",
    )
    per_case = cases * found["seconds"]
    summary.notes.append(
        f"each case sent {found['frames'] / per_case:.2f} frames/s and "
        f"{found['events'] / per_case:.1f} events/s; the sending process (one runner's client) "
        f"used {found['client_core'] * 100:.0f}% of a core"
    )
    for name, calls in (("report_case_screen", screens), ("report_case_trace", traces)):
        summary.notes.append(
            f"{name} under the load: p50 {pct(calls.took, 50):.1f} ms, p99 "
            f"{pct(calls.took, 99):.1f} ms, {len(calls.took)} calls, {calls.failed} failed"
        )


def page_rows(summary: Summary, url: str, member: Any, runs: tuple[int, int], args: Any) -> None:
    long_run, short_run = runs
    paths = [f"/runs/{long_run}/cases/c0/", f"/runs/{short_run}/cases/c0/"]
    if chromium() is None:
        summary.notes.append("no chromium on PATH: the case page was not measured")
        return
    loads = page_loads(url, member.user.get_username(), paths, args.page_repeat)
    long, short = median(loads[paths[0]]), median(loads[paths[1]])
    summary.add(
        benchmark="trace_screens",
        figure=f"case page of a {args.events:,}-event trace: first timeline row",
        value=f"{long.kib:.0f} KiB, {long.ms:.0f} ms",
        baseline=f"10-event trace: {short.kib:.0f} KiB, {short.ms:.0f} ms",
        ratio=f"{long.ms / short.ms:.2f}x",
        target=f"< {PAGE_TARGET_KIB} KiB, < {PAGE_TARGET_MS} ms",
        met=long.kib < PAGE_TARGET_KIB and long.ms < PAGE_TARGET_MS,
    )
    summary.notes.append(
        f"the case page shows {long.rows} rows first; median of {args.page_repeat} loads in "
        "a fresh chromium context each (nothing cached)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=25, help="running cases (25)")
    parser.add_argument("--seconds", type=float, default=60, help="the mixed load (60 s)")
    parser.add_argument("--phase-seconds", type=float, default=20, help="frames, events alone")
    parser.add_argument("--hellos", type=int, default=300, help="hello calls for the baseline")
    parser.add_argument("--events", type=int, default=10_000, help="events of the long trace")
    parser.add_argument("--page-repeat", type=int, default=5, help="page loads measured (5)")
    add_database_arguments(parser)
    args = parser.parse_args()

    summary = Summary("watching cases work: screens and traces, and a long trace's page")
    with scratch_database(args) as scratch:
        print(f"trace_screens — {machine_line(scratch)}")
        member = seed_member()
        can_log_in(member)
        seed_suite(member, name="watched", cases=args.cases)
        (_, token), (_, _) = pair_runners(member.user, 2)
        from runners.models import Runner
        from scorecards.services import run_start

        watching = Runner.objects.get(label="bench-0")
        run_start(
            user=member.user,
            workspace_slug=member.slug,
            harness="watched",
            dataset="watched",
            runtime=f"self:{watching.pk}",
            concurrency=args.cases,
        )
        blobs = json.dumps({"location": str(scratch.workdir / "blobs"), "allow_overwrite": True})
        env: dict[str, Any] = {"EVERDICT_LEASE_TTL_S": 3600}
        env |= {"EVERDICT_BLOB_STORAGE_OPTIONS": blobs, **server_env(args)}
        with daphne(scratch, **env) as server:
            found = asyncio.run(measure_load(server, token, args))
            cpu_rows(summary, found, args.cases)
            reader = Runner.objects.get(label="bench-1")
            runs = (
                seed_trace(member, reader, "long", args.events),
                seed_trace(member, reader, "short", 10),
            )
            page_rows(summary, server.url, member, runs, args)
    finish(summary, args)


if __name__ == "__main__":
    main()
