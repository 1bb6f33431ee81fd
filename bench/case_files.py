"""Files while it runs: latency from a page's file request to its answer, with N idle
runners parked on the same server.

Through a daphne over a scratch database (PostgreSQL by default): one runner, paired through
the services, leases a job over MCP and keeps a `poll_case_fs_requests` long-poll parked for
it, answering each request at once with a listing (`answer_case_fs_request`), as the runner
CLI does while a case runs. N idle runners (each a member of its own) park `lease_job`
long-polls beside it, as in idle_runners.py. Measured: `GET /api/runs/<id>/files?key=K` —
queued for the lease, the runner's poll woken through the hub, answered, handed to the page
waiting on the event loop —
sequentially, first with no idle runner, then with N parked; beside it, in the same run and
under the same N, a `hello` round trip of the answering runner's session (the baseline).
With the server's `fs_answers`, the answer rides on the runner's next poll (one call answers
and parks again), as the runner CLI sends it; `--separate-answers` answers by
`answer_case_fs_request` and polls again, as a runner without it does. The answering runner
runs in a process of its own, as a real runner does, so the bench's
client does not sit on its loop or its GIL; the server's CPU per file request (daphne's
user + system time over the timed requests, warm-up included, divided by their number) is
printed beside the latencies. Target: p50 ≤ 15 ms with 1,000 idle runners.

    .venv/bin/python bench/case_files.py [--n 1000] [--requests 200] [--sqlite] [--separate-answers]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import multiprocessing as mp
import time
from typing import Any

import idle_runners
from databases import add_database_arguments, scratch_database
from report import Summary, finish, machine_line
from seeding import pair_runners, seed_member, seed_suite
from server_profile import ServerProfile
from servers import daphne, raise_open_files, server_env
from stats import latency_line, pct

TARGET_MS = 15.0


class Answerer:
    """The runner holding the case's lease, in a process of its own (so the bench's client
    does not share a CPU's time slices or a GIL with it): one parked poll, each request
    answered at once with a listing; and its `hello` round trips, timed, for the baseline."""

    def __init__(self, url: str, token: str, count: int, separate: bool = False) -> None:
        ctx = mp.get_context("spawn")
        self.ready, self.stop, self.go = ctx.Event(), ctx.Event(), ctx.Event()
        self.counter, self.results = ctx.Value("l", 0), ctx.Queue()
        self.child = ctx.Process(
            target=answer_process,
            args=(
                url,
                token,
                self.ready,
                self.stop,
                self.go,
                self.counter,
                self.results,
                count,
                separate,
            ),
            daemon=True,
        )

    @property
    def answered(self) -> int:
        return int(self.counter.value)

    def start(self) -> None:
        self.child.start()
        if not self.ready.wait(60):
            raise SystemExit("the answering runner did not lease its job")

    def hellos(self) -> list[float]:
        """`count` hello round trips, timed in the runner's process."""
        self.go.set()
        took: list[float] = self.results.get(timeout=300)
        return took

    def close(self) -> None:
        self.stop.set()
        self.go.set()
        self.child.join(30)
        if self.child.is_alive():
            self.child.kill()


def answer_process(
    url: str,
    token: str,
    ready: Any,
    stop: Any,
    go: Any,
    counter: Any,
    results: Any,
    count: int,
    separate: bool,
) -> None:
    asyncio.run(_serve(url, token, ready, stop, go, counter, results, count, separate))


async def _serve(
    url: str,
    token: str,
    ready: Any,
    stop: Any,
    go: Any,
    counter: Any,
    results: Any,
    count: int,
    separate: bool,
) -> None:
    from runnercli.case.files.calls import (
        FS_ANSWERS,
        answer_case_fs_request,
        poll_case_fs_requests,
    )
    from runnercli.client import RunnerClient
    from runnercli.protocol import FsEntry, FsPosted, JobFence

    entries = [FsEntry(path="notes.txt", size=5, kind="file", mtime=0.0)]
    async with RunnerClient(url, token) as client:
        await client.hello(capabilities=["python"])
        batch = await client.lease_job(wait_ms=5000, capabilities=["python"], status="")
        assert batch.lease is not None, "no job leased"
        fence = JobFence(job_id=batch.lease.job_id, lease_epoch=batch.lease.lease_epoch)

        # With the server's `fs_answers` (unless --separate-answers), the answers ride on the
        # next poll, as the runner CLI sends them.
        carry = FS_ANSWERS in client.server_features and not separate

        async def answer() -> None:
            posts: list[FsPosted] = []
            while True:
                reply = await poll_case_fs_requests(client, [fence], 20_000, posts)
                posts = []
                for request in reply.requests:
                    if carry:
                        posts.append(
                            FsPosted(
                                job_id=fence.job_id,
                                lease_epoch=fence.lease_epoch,
                                request_id=request.request_id,
                                entries=entries,
                            )
                        )
                    else:
                        await answer_case_fs_request(
                            client, fence, request.request_id, entries=entries
                        )
                    with counter.get_lock():
                        counter.value += 1

        serving = asyncio.ensure_future(answer())
        ready.set()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, go.wait)
        if not stop.is_set():
            took = []
            for _ in range(count):
                began = time.perf_counter()
                await client.hello(capabilities=["python"])
                took.append(time.perf_counter() - began)
            results.put(took)
        await loop.run_in_executor(None, stop.wait)
        serving.cancel()


def file_requests(url: str, key: str, path: str, count: int) -> list[float]:
    """Seconds for each of `count` sequential `GET <path>` on one keep-alive connection."""
    import httpx2

    took = []
    with httpx2.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {key}"}) as c:
        c.get(path).raise_for_status()  # warm-up
        for _ in range(count):
            began = time.perf_counter()
            reply = c.get(path)
            took.append(time.perf_counter() - began)
            assert reply.status_code == 200, reply.text[:300]
    return took


def park_idle(url: str, tokens: list[str], wait_ms: int, args: argparse.Namespace) -> Any:
    """Start the idle runners' client processes; return (stop, children, results)."""
    ctx = mp.get_context("spawn")
    stop, opened, results = ctx.Event(), ctx.Value("l", 0), ctx.Queue()
    procs = max(1, min(args.client_procs, len(tokens)))
    children = [
        ctx.Process(
            target=idle_runners.client_process,
            args=(url, tokens[i::procs], wait_ms, args.ramp_rate / procs, stop, opened, results),
        )
        for i in range(procs)
    ]
    for child in children:
        child.start()
    deadline = time.monotonic() + len(tokens) / args.ramp_rate + 60
    while time.monotonic() < deadline:
        time.sleep(1)
        parked = int(idle_runners.scrape(url, "everdict_parked_long_polls"))
        parked += int(idle_runners.scrape(url, "everdict_parked_fs_polls"))
        # The answering runner's poll is parked too.
        if parked >= len(tokens) + 1:
            break
    print(f"  {parked} long-polls parked", flush=True)
    return stop, children, results, parked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="idle runners parked (1000)")
    parser.add_argument("--requests", type=int, default=200, help="file requests timed (200)")
    parser.add_argument("--client-procs", type=int, default=2, help="idle client processes")
    parser.add_argument("--ramp-rate", type=float, default=500.0, help="sessions opened per s")
    parser.add_argument(
        "--separate-answers",
        action="store_true",
        help="answer by answer_case_fs_request, then poll again (a runner without fs_answers)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="sample the server with py-spy during the file requests with idle runners parked",
    )
    add_database_arguments(parser)
    args = parser.parse_args()
    raise_open_files(args.n + 256)

    summary = Summary("a running case's file request, beside a hello, with idle runners parked")
    with scratch_database(args) as scratch:
        print(f"case_files — {machine_line(scratch)}")
        member = seed_member()
        seed_suite(member, name="one", cases=1)
        [(runner_id, token)] = pair_runners(member.user, 1)
        from scorecards.services import run_start

        run = run_start(
            user=member.user,
            workspace_slug=member.slug,
            harness="one",
            dataset="one",
            runtime=f"self:{runner_id}",
        )
        tokens = idle_runners.pair_idle_runners(args.n, "each") if args.n else []
        with daphne(scratch, **server_env(args)) as server:
            answerer = Answerer(server.url, token, args.requests, args.separate_answers)
            answerer.start()
            path = f"/api/runs/{run.pk}/files?key=c0"
            cpu = server.cpu_seconds()
            alone = file_requests(server.url, member.api_key, path, args.requests)
            cpu_alone = (server.cpu_seconds() - cpu) / (args.requests + 1)
            wait_ms = idle_runners.negotiated_wait_ms(server.url, token)
            stop, children, results, parked = park_idle(server.url, tokens, wait_ms, args)
            try:
                cpu = server.cpu_seconds()
                spy = (
                    ServerProfile(server.popen.pid, scratch.workdir / "spy.txt")
                    if args.profile
                    else None
                )
                crowded = file_requests(server.url, member.api_key, path, args.requests)
                cpu_crowded = (server.cpu_seconds() - cpu) / (args.requests + 1)
                if spy is not None:
                    print(spy.stop())
                hellos = answerer.hellos()
            finally:
                stop.set()
                errors: dict[str, int] = {}
                for _ in children:
                    for kind, count in results.get(timeout=120)["errors"].items():
                        errors[kind] = errors.get(kind, 0) + count
                for child in children:
                    child.join(30)
                answerer.close()
    for label, values in (
        ("file request, no idle runner", alone),
        (f"file request, {args.n} idle", crowded),
        (f"hello, {args.n} idle", hellos),
    ):
        print(latency_line(label, values))
    p50 = pct(crowded, 50) * 1000
    base = pct(hellos, 50) * 1000
    summary.add(
        benchmark="case_files",
        figure=f"file request p50 / p99, {args.n} idle",
        value=f"{p50:.1f} / {pct(crowded, 99) * 1000:.1f} ms",
        baseline=f"hello p50 {base:.1f} ms; no idle runner {pct(alone, 50) * 1000:.1f} ms",
        ratio=f"{p50 / base:.1f}x" if base and not math.isnan(base) else "—",
        target=f"p50 <= {TARGET_MS:g} ms",
        met=p50 <= TARGET_MS,
    )
    summary.notes.append(
        f"{parked} long-polls parked ({args.n} idle lease_job + the answering runner's poll); "
        f"{answerer.answered} requests answered; client errors "
        f"{', '.join(f'{k} {v}' for k, v in errors.items()) or 'none'}"
    )
    summary.notes.append(
        f"server CPU per file request {cpu_alone * 1000:.1f} ms with no idle runner, "
        f"{cpu_crowded * 1000:.1f} ms with {args.n} idle (the idle runners' own share included)"
    )
    finish(summary, args)


if __name__ == "__main__":
    main()
