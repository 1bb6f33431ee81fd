"""Claim latency against queue depth: 1k, 100k and 1M jobs queued for other owners.

The queue fills with jobs that belong to other members (older than the measured
runner's, so a claim that did not seek straight to its own key would walk past them),
then, at each depth, the measured runner claims a fresh run's jobs one by one through the
queue's service (`runners.queue.job_lease`), and the claim statement itself is timed and
shown with `EXPLAIN (ANALYZE, BUFFERS)` (SQLite: `EXPLAIN QUERY PLAN`). The statement is
the one the service issues, captured while it runs, not a copy of it. Baseline: the
figures at the smallest depth. Target: flat within 2x.

    .venv/bin/python bench/queue_depth.py                      # PostgreSQL, 1k/100k/1M
    .venv/bin/python bench/queue_depth.py --sqlite --levels 1000,100000
"""

from __future__ import annotations

import argparse
import time
from datetime import timedelta
from typing import Any

from databases import add_database_arguments, scratch_database
from report import Summary, finish, machine_line
from seeding import Member, pair_runners, seed_member, seed_suite
from stats import latency_line, ms, pct


def parse_levels(text: str) -> list[int]:
    levels = sorted({int(part.replace("_", "")) for part in text.split(",") if part.strip()})
    if not levels or levels[0] < 1:
        raise argparse.ArgumentTypeError("levels are positive job counts, e.g. 1000,100000")
    return levels


# ------------------------------------------------------------------------- filling


def filler_owners(count: int) -> list[int]:
    from django.contrib.auth import get_user_model

    user_model = get_user_model()
    users = [user_model(username=f"other-{i}", password="!") for i in range(count)]
    user_model.objects.bulk_create(users, batch_size=1000)
    return list(
        user_model.objects.filter(username__startswith="other-").values_list("pk", flat=True)
    )


def filler_run(member: Member) -> tuple[int, int]:
    """A run and a batch for the filler jobs to hang on (the claim never reads either)."""
    from runners.models import JobBatch
    from scorecards.models import DatasetVersion, HarnessVersion, Run, Workspace

    workspace = Workspace.objects.get(slug=member.slug)
    run = Run.objects.create(
        workspace=workspace,
        harness=HarnessVersion.objects.filter(workspace=workspace).earliest("pk"),
        dataset=DatasetVersion.objects.filter(workspace=workspace).earliest("pk"),
        runtime="self:any",
        submitted_by=member.user,
        status="canceled",
    )
    return run.pk, JobBatch.objects.create(payload={}).pk


def fill(*, start: int, stop: int, owners: list[int], run_id: int, batch_id: int) -> float:
    """Insert queued jobs `start`..`stop`-1 for the other owners in one statement."""
    import json

    from django.db import connection, transaction
    from django.utils import timezone

    old = timezone.now() - timedelta(days=1)
    began = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                """
                INSERT INTO runners_runnerjob
                  (owner_id, runner_id, run_id, seq, case_key, batch_id, payload,
                   required_capabilities, needs_features, status, lease_epoch, attempts,
                   max_attempts, created_at, queued_at, reason)
                SELECT (%s::bigint[])[1 + g %% %s], NULL, %s, g, 'f' || g, %s,
                       '{"case": {"key": "f", "input": null}}'::jsonb, '[]'::jsonb, '[]'::jsonb,
                       'queued', 0, 0, 3, %s, %s, ''
                FROM generate_series(%s, %s) AS g
                """,
                [owners, len(owners), run_id, batch_id, old, old, start, stop - 1],
            )
        else:
            stamp = old.strftime("%Y-%m-%d %H:%M:%S.%f")
            cursor.execute(
                """
                WITH RECURSIVE g(x) AS (SELECT %s UNION ALL SELECT x + 1 FROM g WHERE x + 1 < %s)
                INSERT INTO runners_runnerjob
                  (owner_id, runner_id, run_id, seq, case_key, batch_id, payload,
                   required_capabilities, needs_features, status, lease_epoch, attempts,
                   max_attempts, created_at, queued_at, reason)
                SELECT json_extract(%s, '$[' || (x %% %s) || ']'), NULL, %s, x, 'f' || x, %s,
                       '{"case": {"key": "f", "input": null}}', '[]', '[]',
                       'queued', 0, 0, 3, %s, %s, ''
                FROM g
                """,
                [start, stop, json.dumps(owners), len(owners), run_id, batch_id, stamp, stamp],
            )
    return time.perf_counter() - began


def vacuum() -> None:
    """What autovacuum would have done by now: fresh statistics, dead index entries gone."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("VACUUM ANALYZE runners_runnerjob")
            cursor.execute("VACUUM ANALYZE runners_jobattempt")
        else:
            cursor.execute("ANALYZE")


# ------------------------------------------------------------------------ measuring


def dispatch_mine(member: Member, runner_id: int, cases: int) -> None:
    from scorecards.services import run_start

    run_start(
        user=member.user,
        workspace_slug=member.slug,
        harness="mine",
        dataset="mine",
        runtime=f"self:{runner_id}",
        concurrency=min(cases, 256),
    )


def claim_service(runner: Any, claims: int) -> tuple[list[float], str]:
    """Claim `claims` jobs through the service; return the timings and the claim statement."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runners.queue import job_lease

    timings: list[float] = []
    statement = ""
    for i in range(claims):
        if i == 0:
            with CaptureQueriesContext(connection) as captured:
                began = time.perf_counter()
                leased = job_lease(runner=runner)
                timings.append(time.perf_counter() - began)
            statement = claim_statement([q["sql"] for q in captured.captured_queries])
        else:
            began = time.perf_counter()
            leased = job_lease(runner=runner)
            timings.append(time.perf_counter() - began)
        if len(leased) != 1:
            raise RuntimeError(f"claim {i} found no job for the measured runner")
    return timings, statement


def claim_statement(queries: list[str]) -> str:
    """The claim among the statements a lease issued: the ordered read of the job table."""
    for sql in queries:
        flat = " ".join(sql.split())
        if "runners_runnerjob" in flat and "ORDER BY" in flat and flat.startswith("SELECT"):
            return flat
    raise RuntimeError("no claim statement among the lease's queries:\n" + "\n".join(queries))


def claim_raw(statement: str, repeats: int) -> list[float]:
    """Time the claim statement alone, each in a transaction rolled back (nothing changes)."""
    from django.db import connection, transaction

    timings = []
    for _ in range(repeats):
        with transaction.atomic(), connection.cursor() as cursor:
            began = time.perf_counter()
            cursor.execute(statement)
            cursor.fetchall()
            timings.append(time.perf_counter() - began)
            transaction.set_rollback(True)
    return timings


def explain(statement: str) -> str:
    from django.db import connection, transaction

    prefix = (
        "EXPLAIN (ANALYZE, BUFFERS) "
        if connection.vendor == "postgresql"
        else "EXPLAIN QUERY PLAN "
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(prefix + statement)
        rows = cursor.fetchall()
        transaction.set_rollback(True)
    return "\n".join("    " + " | ".join(str(c) for c in row) for row in rows)


def count_queued() -> int:
    from runners.models import RunnerJob

    return RunnerJob.objects.filter(status="queued").count()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--levels",
        type=parse_levels,
        default=parse_levels("1000,100000,1000000"),
        help="queue depths of other owners' jobs (default 1000,100000,1000000)",
    )
    parser.add_argument("--claims", type=int, default=200, help="measured claims per depth")
    parser.add_argument(
        "--owners", type=int, default=100, help="other owners the filler spreads over"
    )
    add_database_arguments(parser)
    args = parser.parse_args()

    summary = Summary("queue depth: claim latency with other owners' jobs queued")
    with scratch_database(args) as scratch:
        print(f"queue depth — {machine_line(scratch)}")
        member = seed_member()
        seed_suite(member, name="mine", cases=args.claims)
        from runners.models import Runner

        runner_id, _token = pair_runners(member.user, 1)[0]
        runner = Runner.objects.get(pk=runner_id)
        owners = filler_owners(args.owners)
        run_id, batch_id = filler_run(member)

        filled = 0
        base_service = base_raw = 0.0
        for level in args.levels:
            took = fill(start=filled, stop=level, owners=owners, run_id=run_id, batch_id=batch_id)
            print(f"\nfilled {level - filled:,} jobs for other owners in {took:.1f} s")
            filled = level
            vacuum()
            dispatch_mine(member, runner_id, args.claims)
            service, statement = claim_service(runner, args.claims)
            # The claim statement again, alone, on the same queue (the next job of a new run).
            dispatch_mine(member, runner_id, 1)
            raw = claim_raw(statement, args.claims)
            plan = explain(statement)
            queued = count_queued()
            p50_service, p50_raw = pct(service, 50), pct(raw, 50)
            if level == args.levels[0]:
                base_service, base_raw = p50_service, p50_raw
            print(f"depth {level:,} other owners' jobs ({queued:,} queued in all)")
            print(latency_line("  job_lease service call (claim + attempt)", service))
            print(latency_line("  claim statement alone", raw))
            print(f"  plan of the claim statement:\n{plan}")
            for label, value, base in (
                ("job_lease p50", p50_service, base_service),
                ("claim SQL p50", p50_raw, base_raw),
            ):
                ratio = value / base if base else float("nan")
                summary.add(
                    benchmark="queue_depth",
                    figure=f"{label} @ {level:,}",
                    value=ms(value),
                    baseline=f"{ms(base)} @ {args.levels[0]:,}",
                    ratio=f"{ratio:.2f}x",
                    target="<= 2x",
                    met=ratio <= 2.0,
                )
        summary.notes.append(
            f"{args.claims} claims per depth; filler spread over {args.owners} other owners, "
            "older than the measured jobs; VACUUM ANALYZE after each fill"
        )
    finish(summary, args)


if __name__ == "__main__":
    main()
