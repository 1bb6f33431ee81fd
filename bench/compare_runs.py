"""Compare at scale: two runs of 10,000 cases with 5 repeats each (flaky cases, B a little
worse), seeded with bulk inserts, compared through `GET /api/runs/<b>/compare?baseline=<a>`
(in process, Django's test client) — the paired test, its interval, Fisher's test and the
Benjamini-Hochberg mark of every changed case, the sentence — beside a plain `GET
/api/runs/<b>` of the same run in the same process. Cold: the runs' cached intervals
dropped first; warm: as a second look finds them. Target: compare ≤ 1 s.

    .venv/bin/python bench/compare_runs.py [--cases 10000] [--repeats 5] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from databases import add_database_arguments, scratch_database
from report import Summary, finish, machine_line
from seeding import seed_member

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGET_MS = 1000.0


def chance(case: int, shift: int) -> int:
    """In tenths, how often case `case` passes: most always or never, some flaky."""
    return max(0, min(10, (case * 7919) % 13 - 1 - shift))


def verdicts(shift: int) -> Callable[[int, int], str]:
    return lambda case, repeat: (
        "pass" if (case * 31 + repeat * 17) % 10 < chance(case, shift) else "fail"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5, help="timed calls per figure (5)")
    add_database_arguments(parser)
    args = parser.parse_args()

    summary = Summary(f"compare: two runs of {args.cases:,} cases x {args.repeats} repeats")
    with scratch_database(args) as scratch:
        from bulk import analyzed, median_ms, member_client, seeded_run
        from django.core.cache import cache

        print(f"compare_runs — {machine_line(scratch)}")
        member = seed_member()
        began = time.perf_counter()
        a, b = (
            seeded_run(
                member.user,
                slug=member.slug,
                name="compare",
                cases=args.cases,
                repeats=args.repeats,
                verdict=verdicts(shift),
            )
            for shift in (0, 1)
        )
        analyzed()
        print(f"seeded two runs in {time.perf_counter() - began:.1f} s")
        client = member_client(member.user)
        compare = f"/api/runs/{b.pk}/compare?baseline={a.pk}"
        get_ms = median_ms(lambda: client.get(f"/api/runs/{b.pk}"), args.repeat, cache.clear)
        cold_ms = median_ms(lambda: client.get(compare), args.repeat, cache.clear)
        warm_ms = median_ms(lambda: client.get(compare), args.repeat)
        numbers = client.get(compare).json()["numbers"]
        print(numbers["sentence"])
        summary.add(
            benchmark="compare_runs",
            figure=f"GET compare, {args.cases:,} cases x {args.repeats}, intervals cold",
            value=f"{cold_ms:.0f} ms",
            baseline=f"GET /api/runs/<id> {get_ms:.0f} ms (cold)",
            ratio=f"{cold_ms / get_ms:.1f}x",
            target=f"≤ {TARGET_MS:.0f} ms",
            met=cold_ms <= TARGET_MS,
        )
        summary.add(
            benchmark="compare_runs",
            figure="the same, the runs' intervals cached",
            value=f"{warm_ms:.0f} ms",
            baseline=f"GET /api/runs/<id> {get_ms:.0f} ms (cold)",
            ratio=f"{warm_ms / get_ms:.1f}x",
            target=f"≤ {TARGET_MS:.0f} ms",
            met=warm_ms <= TARGET_MS,
        )
        summary.notes.append(f"significance: {numbers['significance']}")
    finish(summary, args)


if __name__ == "__main__":
    main()
