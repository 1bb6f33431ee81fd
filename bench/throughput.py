"""Throughput: jobs/s through the whole path beside the raw limit of the same database.

Whole path: a run dispatched through the REST API, then K runner workers — each its own
paired runner and MCP session, over real HTTP to a daphne process — call `lease_job` and
`submit_job_result` (a no-op result) until every job of the run is settled. The clients
are the official MCP SDK (`mcp.Client` over `streamable_http_client`), spread over a few
processes so the client side is not the bottleneck on a small machine.

Raw limit: K psycopg connections doing the same claim on the same table — the statement
`runners.queue` issues (`SELECT … FOR UPDATE SKIP LOCKED`, same WHERE and ORDER BY), then
an UPDATE to leased, committed; then, in a separate transaction, an UPDATE to succeeded.

The batched path: each worker leases up to N jobs per call (`lease_job(max_jobs=N)`) and
reports their results in one `submit_job_results` call — 2/N MCP calls per job instead
of 2 — beside the raw loop claiming N per transaction. Targets: ≥ 20 % of the raw limit
one job per call; ≥ 50 % batched.

    .venv/bin/python bench/throughput.py [--jobs 2000] [--workers 4] [--batch 8,32]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import time
from dataclasses import dataclass, field
from typing import Any

from databases import Scratch, add_database_arguments, scratch_database
from mcp_runner import leased_jobs, mcp_session, no_op_result
from report import Summary, finish, machine_line
from seeding import Member, pair_runners, seed_member, seed_suite
from server_profile import ServerProfile
from servers import Server, daphne, server_env

WAIT_MS = 1000


@dataclass
class Phase:
    label: str
    jobs: int = 0
    seconds: float = 0.0
    dispatch_s: float = 0.0
    lease_calls: int = 0
    submit_calls: int = 0
    refused: int = 0
    server_cpu_s: float = 0.0
    client_cpu_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def rate(self) -> float:
        return self.jobs / self.seconds if self.seconds else 0.0

    @property
    def calls_per_job(self) -> float:
        return (self.lease_calls + self.submit_calls) / self.jobs if self.jobs else 0.0


# ----------------------------------------------------------------------- raw limit


def claim_sql() -> str:
    """The claim as runners.queue issues it on PostgreSQL (ids only), with psycopg params."""
    return (
        "SELECT id FROM runners_runnerjob"
        " WHERE owner_id = %(owner)s AND status = 'queued'"
        " AND (runner_id = %(runner)s OR runner_id IS NULL)"
        " AND required_capabilities <@ %(caps)s::jsonb"
        " AND needs_features <@ %(features)s::jsonb"
        " ORDER BY created_at, id LIMIT %(limit)s"
        " FOR UPDATE OF runners_runnerjob SKIP LOCKED"
    )


def raw_worker(url: str, owner: int, runner: int, per_claim: int, go: Any, results: Any) -> None:
    """One consumer process: claim, mark leased, commit; complete each job in its own commit."""
    import psycopg

    try:
        with psycopg.connect(url) as conn:
            conn.execute("SELECT 1")
            conn.commit()
            go.wait()
            done = 0
            while True:
                with conn.transaction():
                    params = {
                        "owner": owner,
                        "runner": runner,
                        "caps": '["python"]',
                        "features": "[]",
                        "limit": per_claim,
                    }
                    ids = [row[0] for row in conn.execute(claim_sql(), params)]
                    if not ids:
                        break
                    conn.execute(
                        "UPDATE runners_runnerjob SET status = 'leased', leased_by_id = %s,"
                        " leased_until = now() + interval '60 seconds',"
                        " lease_epoch = lease_epoch + 1, attempts = attempts + 1"
                        " WHERE id = ANY(%s)",
                        [runner, ids],
                    )
                # Completed one by one, as the runner reports each job on its own.
                for job_id in ids:
                    with conn.transaction():
                        conn.execute(
                            "UPDATE runners_runnerjob SET status = 'succeeded',"
                            " finished_at = now(), leased_until = NULL"
                            " WHERE id = %s AND status = 'leased' AND leased_by_id = %s",
                            [job_id, runner],
                        )
                done += len(ids)
            results.put({"done": done, "ended": time.time()})
    except Exception as exc:
        results.put({"error": repr(exc)})


def queue_all(member: Member, cases: str, runner_ids: list[int]) -> int:
    """Dispatch a run through the service and make every one of its jobs claimable at once."""
    from django.db import connection

    from scorecards.services import run_start

    run = run_start(
        user=member.user,
        workspace_slug=member.slug,
        harness=cases,
        dataset=cases,
        runtime="self:any",
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runners_runnerjob SET status = 'queued', queued_at = now()"
            " WHERE run_id = %s AND status = 'pending'",
            [run.pk],
        )
    return run.pk


def vacuum() -> None:
    from django.db import connection

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE runners_runnerjob")
            cursor.execute("VACUUM ANALYZE runners_jobattempt")


def measure_raw(
    scratch: Scratch,
    member: Member,
    runner_ids: list[int],
    suite: str,
    per_claim: int,
) -> Phase:
    from runners.models import RunnerJob

    run_id = queue_all(member, suite, runner_ids)
    total = RunnerJob.objects.filter(run_id=run_id).count()
    vacuum()
    # One process per consumer, like the runners and the server: no shared interpreter.
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=raw_worker,
            args=(scratch.libpq_url(), member.user.pk, rid, per_claim, go, results),
        )
        for rid in runner_ids
    ]
    for proc in procs:
        proc.start()
    time.sleep(3)  # every consumer connected and waiting
    began = time.time()
    go.set()
    reports = [results.get(timeout=600) for _ in procs]
    for proc in procs:
        proc.join(30)
    errors = [r["error"] for r in reports if "error" in r]
    if errors:
        raise RuntimeError(f"raw workers failed: {errors}")
    took = max(r["ended"] for r in reports) - began
    settled = RunnerJob.objects.filter(run_id=run_id, status="succeeded").count()
    if settled != total:
        raise RuntimeError(f"raw loop settled {settled} of {total} jobs")
    return Phase(label=f"raw psycopg, {per_claim}/claim", jobs=settled, seconds=took)


# ------------------------------------------------------------------ whole path (MCP)


async def _worker(
    client: Any, batch: int, total: int, counter: Any, finished_at: Any, stats: dict[str, int]
) -> None:
    args: dict[str, Any] = {"protocol": 2, "wait_ms": WAIT_MS, "status": "idle"}
    if batch > 1:
        args["max_jobs"] = batch
    while counter.value < total:
        reply = await client.call_tool("lease_job", args)
        stats["lease"] += 1
        if reply.is_error:
            raise RuntimeError(f"lease_job failed: {reply.content}")
        jobs = leased_jobs(reply.structured_content)
        if not jobs:
            continue
        if batch > 1:
            # Batched both ways: the leased jobs' results go back in one call.
            reply = await client.call_tool(
                "submit_job_results",
                {
                    "results": [
                        {
                            "job_id": j["job_id"],
                            "lease_epoch": j["lease_epoch"],
                            "result": no_op_result(),
                        }
                        for j in jobs
                    ]
                },
            )
            stats["submit"] += 1
            if reply.is_error:
                raise RuntimeError(f"submit_job_results failed: {reply.content}")
            acks = (reply.structured_content or {}).get("acks", [])
            stats["refused"] += sum(1 for a in acks if not a.get("accepted"))
        else:
            reply = await client.call_tool(
                "submit_job_result",
                {
                    "job_id": jobs[0]["job_id"],
                    "lease_epoch": jobs[0]["lease_epoch"],
                    "result": no_op_result(),
                },
            )
            stats["submit"] += 1
            content = reply.structured_content or {}
            if reply.is_error or not content.get("accepted"):
                stats["refused"] += 1
        with counter.get_lock():
            counter.value += len(jobs)
            if counter.value >= total and finished_at.value == 0.0:
                finished_at.value = time.time()


def client_process(
    url: str,
    tokens: list[str],
    batch: int,
    total: int,
    counter: Any,
    finished_at: Any,
    ready: Any,
    go: Any,
    results: Any,
) -> None:
    import resource
    from contextlib import AsyncExitStack

    async def run() -> dict[str, int]:
        stats = {"lease": 0, "submit": 0, "refused": 0}
        async with AsyncExitStack() as stack:
            clients = [
                await stack.enter_async_context(
                    mcp_session(url, t, read_timeout=WAIT_MS / 1000 + 30)
                )
                for t in tokens
            ]
            # Every session is open before the dispatch; the first polls park on an empty queue.
            ready.wait()
            go.wait()
            await asyncio.gather(
                *(_worker(c, batch, total, counter, finished_at, stats) for c in clients)
            )
        return stats

    try:
        stats: dict[str, Any] = asyncio.run(run())
    except BaseException:
        import traceback

        results.put({"error": traceback.format_exc()})
        raise
    usage = resource.getrusage(resource.RUSAGE_SELF)
    stats["cpu_ms"] = int((usage.ru_utime + usage.ru_stime) * 1000)
    results.put(stats)


def measure_mcp(
    server: Server,
    member: Member,
    tokens: list[str],
    suite: str,
    jobs: int,
    batch: int,
    procs: int,
    profile: bool = False,
) -> Phase:
    import httpx2

    from runners.models import RunnerJob
    from scorecards.models import Run

    vacuum()
    ctx = mp.get_context("spawn")
    counter = ctx.Value("l", 0)
    finished_at = ctx.Value("d", 0.0)
    procs = max(1, min(procs, len(tokens)))
    ready = ctx.Barrier(procs + 1)
    go = ctx.Event()
    results = ctx.Queue()
    children = [
        ctx.Process(
            target=client_process,
            args=(
                server.url,
                tokens[i::procs],
                batch,
                jobs,
                counter,
                finished_at,
                ready,
                go,
                results,
            ),
        )
        for i in range(procs)
    ]
    for child in children:
        child.start()
    ready.wait()
    spy = ServerProfile(server.pid, server.log.with_suffix(f".b{batch}.spy")) if profile else None
    cpu_before = server.cpu_seconds()
    go.set()
    time.sleep(0.2)  # the workers' first long-polls park on the empty queue
    began_wall = time.time()
    began = time.perf_counter()
    reply = httpx2.post(
        f"{server.url}/api/workspaces/{member.slug}/runs",
        headers={"Authorization": f"Bearer {member.api_key}"},
        json={"harness": suite, "dataset": suite, "runtime": "self:any", "concurrency": 256},
        timeout=60,
    )
    dispatched = time.perf_counter() - began
    reply.raise_for_status()
    run_id = reply.json()["id"]
    stats = [results.get(timeout=1800) for _ in children]
    for child in children:
        child.join(30)
    errors = [s["error"] for s in stats if "error" in s]
    if errors:
        raise RuntimeError("a client process failed:\n" + "\n".join(errors))
    server_cpu = server.cpu_seconds() - cpu_before
    took = finished_at.value - began_wall
    hot = spy.stop() if spy is not None else ""
    settled = RunnerJob.objects.filter(run_id=run_id, status="succeeded").count()
    run = Run.objects.get(pk=run_id)
    if settled != jobs or run.status != "succeeded":
        raise RuntimeError(f"{settled} of {jobs} jobs settled; run is {run.status}")
    label = f"MCP, {batch}/lease_job" if batch > 1 else "MCP, 1/lease_job"
    return Phase(
        label=label,
        jobs=settled,
        seconds=took,
        dispatch_s=dispatched,
        lease_calls=sum(s["lease"] for s in stats),
        submit_calls=sum(s["submit"] for s in stats),
        refused=sum(s["refused"] for s in stats),
        server_cpu_s=server_cpu,
        client_cpu_s=sum(s["cpu_ms"] for s in stats) / 1000,
        extra={"profile": hot} if hot else {},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000, help="jobs through MCP per phase")
    parser.add_argument("--raw-jobs", type=int, default=5000, help="jobs through the raw loop")
    parser.add_argument("--workers", type=int, default=4, help="K concurrent runner workers")
    parser.add_argument(
        "--batch", default="8,32", help="max_jobs sizes for the batched phases (8,32)"
    )
    parser.add_argument("--client-procs", type=int, default=2, help="client processes (2)")
    parser.add_argument(
        "--profile", action="store_true", help="sample the server with py-spy during MCP phases"
    )
    add_database_arguments(parser)
    args = parser.parse_args()
    if args.sqlite:
        parser.error("the raw limit is a PostgreSQL SKIP LOCKED loop: run on PostgreSQL")
    sizes = sorted({int(x) for x in args.batch.split(",") if x.strip()} - {1})

    summary = Summary("throughput: whole path over MCP vs the raw SKIP LOCKED limit")
    with scratch_database(args) as scratch:
        print(f"throughput — {machine_line(scratch)}")
        member = seed_member()
        for n in (1, *sizes):
            seed_suite(member, name=f"raw-{n}", cases=args.raw_jobs)
            seed_suite(member, name=f"mcp-{n}", cases=args.jobs)
        paired = pair_runners(member.user, args.workers, label="worker")
        runner_ids = [rid for rid, _ in paired]
        tokens = [token for _, token in paired]

        # Each batch size beside the raw loop claiming as many per transaction.
        raw = {n: measure_raw(scratch, member, runner_ids, f"raw-{n}", n) for n in (1, *sizes)}
        mcp: dict[int, Phase] = {}
        with daphne(scratch, **server_env(args)) as server:
            for n in (1, *sizes):
                mcp[n] = measure_mcp(
                    server,
                    member,
                    tokens,
                    f"mcp-{n}",
                    args.jobs,
                    n,
                    args.client_procs,
                    args.profile,
                )
            rss = server.rss_bytes()

        print(f"\n{args.workers} workers; daphne RSS at the end {rss / 2**20:.0f} MiB")
        for p in [*raw.values(), *mcp.values()]:
            line = f"{p.label:<26} {p.jobs:>6} jobs in {p.seconds:6.2f} s = {p.rate:8.1f} jobs/s"
            if p.lease_calls:
                line += (
                    f"   {p.calls_per_job:.2f} MCP calls/job ({p.lease_calls} lease_job,"
                    f" {p.submit_calls} submit calls, {p.refused} refused);"
                    f" dispatch {p.dispatch_s * 1000:.0f} ms; server CPU"
                    f" {p.server_cpu_s / p.jobs * 1000:.2f} ms/job; clients' CPU"
                    f" {p.client_cpu_s / p.jobs * 1000:.2f} ms/job"
                )
            print(line)
        for p in mcp.values():
            if p.extra.get("profile"):
                print(f"\nserver profile during {p.label} (py-spy):\n{p.extra['profile']}")

        for n, p in mcp.items():
            baseline = raw[n]
            ratio = p.rate / baseline.rate
            target = 0.2 if n == 1 else 0.5
            summary.add(
                benchmark="throughput",
                figure=f"{p.label} (K={args.workers})",
                value=f"{p.rate:.0f} jobs/s",
                baseline=f"{baseline.rate:.0f} jobs/s {baseline.label}",
                ratio=f"{ratio:.1%}",
                target=f">= {target:.0%}",
                met=ratio >= target,
            )
            summary.notes.append(
                f"{p.label}: {p.calls_per_job:.2f} MCP calls per job;"
                f" {p.rate / raw[1].rate:.0%} of raw 1/claim"
            )
    finish(summary, args)


if __name__ == "__main__":
    main()
