"""What settling a batch of reported results costs in process, a result at a time: each of
the settle's statements converted for the server once per process (`core.prebuilt`),
beside psycopg converting any statement of more than 50 parameters again on every run.

In this process, on a scratch PostgreSQL database analysed after seeding (as autovacuum
would have): one run of many cases, leased `--batch` jobs at a time by one runner, and each
batch's results reported through `results_submit` (graded, fenced, recorded, the run
advanced), the time of that call divided by the batch; interleaved rounds of both ways of
converting, so a noisy neighbour slows both alike. The statements run prepared, as
deployed. On SQLite there is nothing to convert: the benchmark says so and measures nothing.

    .venv/bin/python bench/settle.py [--batch 8] [--rounds 10] [--per-round 25]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from databases import add_database_arguments, scratch_database
from report import Summary, finish, machine_line
from seeding import pair_runners, seed_member, seed_suite
from stats import pct

SUITE = "settle"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=8, help="results a report (8)")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (10)")
    parser.add_argument("--per-round", type=int, default=25, help="batches a round of each (25)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed batches first (20)")
    add_database_arguments(parser)
    args = parser.parse_args()

    summary = Summary("settling reported results, in process")
    with scratch_database(args) as scratch:
        print(f"settle — {machine_line(scratch)}")
        if not scratch.is_postgres:
            summary.notes.append("PostgreSQL only: SQLite's statements are not converted")
            finish(summary, args)
            return
        batches = args.warmup + 2 * args.rounds * args.per_round
        per_result = measure(args, cases=batches * args.batch)
    ours, psycopgs = per_result["once"], per_result["psycopg"]
    ratio = statistics.median(ours) / statistics.median(psycopgs)
    summary.add(
        benchmark="settle",
        figure=f"a result settled in a batch of {args.batch} p50 / p90",
        value=f"{pct(ours, 50):.3f} / {pct(ours, 90):.3f} ms",
        baseline=(
            f"each statement converted by psycopg {pct(psycopgs, 50):.3f} / "
            f"{pct(psycopgs, 90):.3f} ms"
        ),
        ratio=f"{ratio:.2f}x",
        target="-",
    )
    summary.notes.append(
        f"{args.rounds} rounds of {args.per_round} batches each way, interleaved, after "
        f"{args.warmup} untimed; the time of `results_submit` divided by the batch"
    )
    finish(summary, args)


def measure(args: argparse.Namespace, *, cases: int) -> dict[str, list[float]]:
    """Milliseconds a result of each batch reported, by the way statements are converted."""
    from django.db import connection
    from psycopg._queries import PostgresQuery

    from core import prebuilt
    from runnercli.protocol import CaseResult, Fingerprint, ResultReport
    from runners import queue
    from runners.models import Runner
    from scorecards.services import results_submit, run_start

    member = seed_member()
    seed_suite(member, name=SUITE, cases=cases)
    runner_id, _ = pair_runners(member.user, 1)[0]
    runner = Runner.objects.get(pk=runner_id)
    run_start(
        user=member.user,
        workspace_slug=member.slug,
        harness=SUITE,
        dataset=SUITE,
        runtime=f"self:{runner_id}",
        concurrency=256,
    )
    fingerprint = Fingerprint(os="linux", python="3.11", runnercli_version="bench")

    def settle_one() -> float:
        grants = queue.job_lease(runner=runner, max_jobs=args.batch)
        assert grants, "the run has no job left to lease"
        reports = [
            ResultReport(
                job_id=grant.job.pk,
                lease_epoch=grant.job.lease_epoch,
                result=CaseResult(
                    status="completed",
                    exit_code=0,
                    output="0",
                    duration_ms=1,
                    fingerprint=fingerprint,
                ),
            )
            for grant in grants
        ]
        began = time.perf_counter()
        acks = results_submit(runner=runner, reports=reports)
        took = time.perf_counter() - began
        assert all(ack.accepted for ack in acks), acks
        return took * 1000 / len(grants)

    preparing: Any = prebuilt._preparing_cursors()[0]
    once = preparing._query_cls
    for _ in range(args.warmup):
        settle_one()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    taken: dict[str, list[float]] = {"once": [], "psycopg": []}
    try:
        for _ in range(args.rounds):
            for name, query_class in (("once", once), ("psycopg", PostgresQuery)):
                preparing._query_cls = query_class
                taken[name] += [settle_one() for _ in range(args.per_round)]
    finally:
        preparing._query_cls = once
    return taken


if __name__ == "__main__":
    main()
