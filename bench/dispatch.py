"""Dispatch: creating a 10,000-case run through `scorecards.services.run_start`.

Each repetition starts a run of the whole dataset on the member's runner and times the
service call, commit included. Baseline, in the same run: the raw limit of writing the
same rows — the job rows that dispatch wrote, read back, deleted, and written again in one
COPY (SQLite: one executemany) on a bare connection, commit included. Target: ≤ 1 s.

    .venv/bin/python bench/dispatch.py [--cases 10000] [--repeat 5] [--profile]
    .venv/bin/python bench/dispatch.py --sqlite
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import time
from typing import Any

from databases import Scratch, add_database_arguments, scratch_database
from report import Summary, finish, machine_line
from seeding import Member, pair_runners, seed_member, seed_suite

TARGET_S = 1.0


def start_run(member: Member, runner_id: int) -> tuple[float, int]:
    from scorecards.services import run_start

    began = time.perf_counter()
    run = run_start(
        user=member.user,
        workspace_slug=member.slug,
        harness="big",
        dataset="big",
        runtime=f"self:{runner_id}",
    )
    return time.perf_counter() - began, run.pk


def job_columns() -> list[str]:
    from runners.models import RunnerJob

    return [f.column for f in RunnerJob._meta.concrete_fields if not f.primary_key]


def take_rows(run_id: int, columns: list[str]) -> list[tuple[Any, ...]]:
    """Read back the rows dispatch wrote for the run, then delete them."""
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {', '.join(columns)} FROM runners_runnerjob WHERE run_id = %s ORDER BY seq",
            [run_id],
        )
        rows = cursor.fetchall()
        cursor.execute("DELETE FROM runners_runnerjob WHERE run_id = %s", [run_id])
    return [tuple(row) for row in rows]


def raw_write(scratch: Scratch, columns: list[str], rows: list[tuple[Any, ...]]) -> float:
    """Write the rows on a bare connection in one COPY / executemany; seconds, commit included."""
    names = ", ".join(columns)
    if scratch.is_postgres:
        import psycopg
        from psycopg.types.json import Jsonb

        json_columns = {"payload", "required_capabilities", "needs_features"}
        adapted = [
            tuple(Jsonb(v) if c in json_columns else v for c, v in zip(columns, row, strict=True))
            for row in rows
        ]
        with psycopg.connect(scratch.libpq_url()) as conn:
            began = time.perf_counter()
            with (
                conn.cursor() as cursor,
                cursor.copy(f"COPY runners_runnerjob ({names}) FROM STDIN") as copy,
            ):
                for row in adapted:
                    copy.write_row(row)
            conn.commit()
            return time.perf_counter() - began
    path = scratch.url.removeprefix("sqlite:///")
    lite = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        lite.execute("PRAGMA journal_mode=WAL")
        lite.execute("PRAGMA synchronous=NORMAL")
        marks = ", ".join("?" for _ in columns)
        began = time.perf_counter()
        lite.execute("BEGIN IMMEDIATE")
        lite.executemany(f"INSERT INTO runners_runnerjob ({names}) VALUES ({marks})", rows)
        lite.execute("COMMIT")
        return time.perf_counter() - began
    finally:
        lite.close()


def profile_once(member: Member, runner_id: int) -> str:
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005)
    profiler.start()
    start_run(member, runner_id)
    profiler.stop()
    return str(profiler.output_text(unicode=True, color=False, show_all=False))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases in the run (10000)")
    parser.add_argument("--repeat", type=int, default=5, help="runs started and timed (5)")
    parser.add_argument(
        "--profile", action="store_true", help="profile one dispatch (also done on a miss)"
    )
    add_database_arguments(parser)
    args = parser.parse_args()

    summary = Summary(f"dispatch: a {args.cases:,}-case run")
    with scratch_database(args) as scratch:
        print(f"dispatch — {machine_line(scratch)}")
        member = seed_member()
        began = time.perf_counter()
        seed_suite(member, name="big", cases=args.cases)
        print(f"seeded a {args.cases:,}-case dataset in {time.perf_counter() - began:.1f} s")
        runner_id, _token = pair_runners(member.user, 1)[0]

        start_run(member, runner_id)  # warm-up: imports, caches, first connection
        timings: list[float] = []
        last_run = 0
        for _ in range(args.repeat):
            took, last_run = start_run(member, runner_id)
            timings.append(took)
        columns = job_columns()
        rows = take_rows(last_run, columns)
        if len(rows) != args.cases:
            raise RuntimeError(f"dispatch wrote {len(rows)} jobs for {args.cases} cases")
        raw = [raw_write(scratch, columns, rows)]
        for _ in range(args.repeat - 1):
            take_rows(last_run, columns)
            raw.append(raw_write(scratch, columns, rows))

        median, raw_median = statistics.median(timings), statistics.median(raw)
        print(
            f"run_start, {args.cases:,} cases: median {median:.3f} s, "
            f"min {min(timings):.3f} s, max {max(timings):.3f} s (n={len(timings)})"
        )
        print(
            f"raw write of the same {len(rows):,} job rows: median {raw_median:.3f} s, "
            f"min {min(raw):.3f} s (n={len(raw)})"
        )
        summary.add(
            benchmark="dispatch",
            figure=f"run_start, {args.cases:,} cases (median)",
            value=f"{median:.3f} s",
            baseline=f"{raw_median:.3f} s raw {'COPY' if scratch.is_postgres else 'executemany'}",
            ratio=f"{median / raw_median:.1f}x raw" if raw_median else "-",
            target=f"<= {TARGET_S:g} s",
            met=median <= TARGET_S,
        )
        if args.profile or median > TARGET_S:
            print("\nprofile of one dispatch (pyinstrument):")
            print(profile_once(member, runner_id))
    finish(summary, args)


if __name__ == "__main__":
    main()
