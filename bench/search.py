"""Search at scale: a run of 10,000 cases whose settled attempts hold 100 trace events each
(one million events, seeded with bulk inserts), searched for a phrase inside one event of one
case through `GET /api/runs/<id>/search` and `GET /api/workspaces/<slug>/search` (in
process, Django's test client) beside a plain `GET /api/runs/<id>` of the same run. Then the
cost the search index adds to storing trace events: the same bulk insert timed with the
index (PostgreSQL's trigram GIN index; SQLite's FTS5 trigger) and without it. Target: search
p50 ≤ 200 ms.

    .venv/bin/python bench/search.py [--cases 10000] [--events 100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from databases import add_database_arguments, scratch_database
from report import Summary, finish, machine_line
from seeding import seed_member

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TARGET_MS = 200.0
PHRASE = "rm -rf /srv/cache"
INSERTED = 20_000

# What dropping the index for storage's baseline takes, and what puts it back.
WITHOUT_INDEX = {
    "postgresql": (
        ["DROP INDEX search_traceevent_data_trgm"],
        [
            "CREATE INDEX search_traceevent_data_trgm ON scorecards_traceevent"
            " USING gin ((data::text) gin_trgm_ops)"
        ],
    ),
    "sqlite": (["DROP TRIGGER search_traceevent_fts_ai"], None),
}


def event(needle_case: int, needle_n: int) -> Callable[[int, int], dict[str, Any]]:
    def data(case: int, n: int) -> dict[str, Any]:
        if case == needle_case and n == needle_n:
            return {"kind": "tool_call", "name": "Bash", "input": {"command": f"sudo {PHRASE}"}}
        if n % 2:
            return {"kind": "tool_result", "name": "Bash", "output": f"ok {case}.{n}", "ms": n}
        return {"kind": "message", "text": f"Looking at case {case}, step {n}: reading files."}

    return data


def insert_ms(attempt_id: int, first_seq: int, count: int) -> float:
    """Milliseconds to store `count` trace events of one attempt, in bulk."""
    from scorecards.traces.models import TraceEvent

    rows = [
        TraceEvent(attempt_id=attempt_id, seq=first_seq + n, ts=n, kind="message", data=body)
        for n in range(count)
        for body in [{"kind": "message", "text": f"appended {n}: nothing to see {n * 7}"}]
    ]
    began = time.perf_counter()
    TraceEvent.objects.bulk_create(rows, batch_size=1000)
    return (time.perf_counter() - began) * 1000


def storage_cost(attempt_id: int, count: int) -> tuple[float, float]:
    """(with the index, without it) in µs an event; the index is put back after."""
    from django.db import connection

    with_index = insert_ms(attempt_id, 1_000_000, count)
    drop, restore = WITHOUT_INDEX[connection.vendor]
    with connection.cursor() as cursor:
        for statement in drop:
            cursor.execute(statement)
    without = insert_ms(attempt_id, 2_000_000, count)
    if restore:
        with connection.cursor() as cursor:
            for statement in restore:
                cursor.execute(statement)
    return with_index * 1000 / count, without * 1000 / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--events", type=int, default=100, help="trace events a case (100)")
    parser.add_argument("--repeat", type=int, default=5, help="timed calls per figure (5)")
    parser.add_argument("--inserted", type=int, default=INSERTED, help="events stored, timed")
    add_database_arguments(parser)
    args = parser.parse_args()

    size = f"{args.cases:,} cases x {args.events} trace events"
    summary = Summary(f"search: {size}")
    with scratch_database(args) as scratch:
        from bulk import analyzed, median_ms, member_client, seeded_run, traces_add

        print(f"search — {machine_line(scratch)}")
        member = seed_member()
        began = time.perf_counter()
        run = seeded_run(
            member.user, slug=member.slug, name="search", cases=args.cases, attempts=True
        )
        needle = args.cases * 3 // 4
        written = traces_add(run, events=args.events, data=event(needle, args.events // 2))
        analyzed()
        print(f"seeded {written:,} trace events in {time.perf_counter() - began:.1f} s")
        client = member_client(member.user)
        query = {"q": PHRASE.upper()}
        reply = client.get(f"/api/runs/{run.pk}/search", query).json()
        assert [m["case"] for m in reply["matches"]] == [f"c{needle}"], reply
        print(reply["matches"][0]["hits"][0]["snippet"])
        get_ms = median_ms(lambda: client.get(f"/api/runs/{run.pk}"), args.repeat)
        run_ms = median_ms(lambda: client.get(f"/api/runs/{run.pk}/search", query), args.repeat)
        workspace = f"/api/workspaces/{member.slug}/search"
        ws_ms = median_ms(lambda: client.get(workspace, query), args.repeat)
        for figure, value in (
            (f"GET run search, {size}, p50", run_ms),
            ("GET workspace search, the same, p50", ws_ms),
        ):
            summary.add(
                benchmark="search",
                figure=figure,
                value=f"{value:.0f} ms",
                baseline=f"GET /api/runs/<id> {get_ms:.0f} ms",
                ratio=f"{value / get_ms:.1f}x",
                target=f"≤ {TARGET_MS:.0f} ms",
                met=value <= TARGET_MS,
            )
        attempt_id = run.results.values_list("attempt_id", flat=True).first()
        assert attempt_id is not None
        with_us, without_us = storage_cost(attempt_id, args.inserted)
        summary.add(
            benchmark="search",
            figure=f"storing trace events with the search index, {args.inserted:,} in bulk",
            value=f"{with_us:.0f} µs an event",
            baseline=f"without the index {without_us:.0f} µs an event",
            ratio=f"{with_us / without_us:.1f}x",
            target="measured",
            met=True,
        )
    finish(summary, args)


if __name__ == "__main__":
    main()
