"""The run page at scale: what a viewer's page load, REST read and live update cost for a run of
100 cases beside one of 10,000 (seeded with bulk inserts, outputs of 2 KB each).

- page: `GET /runs/<id>/` (Django's test client, in process), median time and bytes;
- reply: `GET /api/runs/<id>`, median time and bytes;
- update: one WebSocket pass after one new result settled (`run_changes`, what the consumer
  sends), median time and bytes; its same-run baseline is what every update used to be — the
  whole run, every result with a 500-character output preview;
- idle pass: one WebSocket pass with nothing new.

    .venv/bin/python bench/run_page.py [--sizes 100,10000] [--repeat 9] [--sqlite]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from databases import add_database_arguments, scratch_database
from report import Summary, finish, machine_line
from seeding import seed_member

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

OUTPUT_BYTES = 2000
OLD_PREVIEW_CHARS = 500


def timed(work: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median milliseconds of `work` over `repeat` calls (after one warm-up), and its result."""
    result = work()
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        result = work()
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), result


def whole_run_update(run: Any) -> bytes:
    """The update as it was: the run reply with every result, outputs cut to 500 characters."""
    from scorecards.replies.results import result_items
    from scorecards.replies.runs import RunSummary
    from scorecards.selectors.results import results_of, with_previews
    from scorecards.selectors.summary import run_summary

    everything = with_previews(list(results_of(run).values_list("pk", flat=True)))
    results = [item.data() for item in result_items(everything)]
    for result in results:
        result["output"] = result["output"][:OLD_PREVIEW_CHARS]
    summary = RunSummary.model_validate(run_summary(run)).data()
    message = {"type": "run", "run": {"id": run.pk, "summary": summary, "results": results}}
    return json.dumps(message).encode()


def measure(member: Any, cases: int, repeat: int) -> dict[str, Any]:
    from bulk import seeded_run
    from django.test import Client

    from scorecards.live import Watch, run_changes
    from scorecards.models import CaseResult, RunStatus
    from scorecards.selectors.runs import run_get

    began = time.perf_counter()
    run = seeded_run(
        member.user,
        slug=member.slug,
        name=f"size{cases}",
        cases=cases,
        output=lambda c, r: "x" * OUTPUT_BYTES,
        status=RunStatus.RUNNING,
    )
    print(f"seeded a {cases:,}-case run in {time.perf_counter() - began:.1f} s")
    client = Client(HTTP_HOST="127.0.0.1")
    client.force_login(member.user)
    figures: dict[str, Any] = {}
    figures["page_ms"], page = timed(lambda: client.get(f"/runs/{run.pk}/"), repeat)
    assert page.status_code == 200, page.status_code
    figures["page_bytes"] = len(page.content)
    figures["reply_ms"], reply = timed(lambda: client.get(f"/api/runs/{run.pk}"), repeat)
    figures["reply_bytes"] = len(reply.content)

    last = CaseResult.objects.get(run=run, seq=cases)
    user = member.user

    def one_update() -> bytes:
        last.pk = None
        CaseResult.objects.filter(run=run, seq=cases).delete()
        watch = Watch(results_after=cases - 1)
        run_changes(user=user, run=run_get(user=user, run_id=run.pk), watch=watch)  # in step
        CaseResult.objects.bulk_create([last])
        began = time.perf_counter()
        messages, _ = run_changes(user=user, run=run_get(user=user, run_id=run.pk), watch=watch)
        one_update.took.append((time.perf_counter() - began) * 1000)  # type: ignore[attr-defined]
        return json.dumps(messages).encode()

    one_update.took = []  # type: ignore[attr-defined]
    _, update = timed(one_update, repeat)
    figures["update_ms"] = statistics.median(one_update.took)  # type: ignore[attr-defined]
    figures["update_bytes"] = len(update)
    watch = Watch(results_after=cases, logs_after=10**12, events_after=10**12)
    run_changes(user=user, run=run, watch=watch)
    figures["idle_ms"], _ = timed(
        lambda: run_changes(user=user, run=run_get(user=user, run_id=run.pk), watch=watch),
        repeat,
    )
    figures["before_ms"], before = timed(lambda: whole_run_update(run), max(3, repeat // 3))
    figures["before_bytes"] = len(before)
    return figures


def kb(size: int) -> str:
    return f"{size / 1024:,.1f} KiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100,10000", help="two run sizes (100,10000)")
    parser.add_argument("--repeat", type=int, default=9, help="timed calls per figure (9)")
    add_database_arguments(parser)
    args = parser.parse_args()
    small, large = (int(n) for n in args.sizes.split(","))

    summary = Summary(f"run page: a {small:,}-case run beside a {large:,}-case one")
    with scratch_database(args) as scratch:
        print(f"run_page — {machine_line(scratch)}")
        member = seed_member()
        at = {n: measure(member, n, args.repeat) for n in (small, large)}
        s, b = at[small], at[large]
        for key, label in (
            ("page", "run page GET"),
            ("reply", "GET /api/runs/<id>"),
            ("update", "WebSocket update, 1 new result"),
        ):
            summary.add(
                benchmark="run_page",
                figure=f"{label}, {large:,} cases (beside {small:,})",
                value=f"{b[key + '_ms']:.1f} ms, {kb(b[key + '_bytes'])}",
                baseline=f"{s[key + '_ms']:.1f} ms, {kb(s[key + '_bytes'])} at {small:,}",
                ratio=f"{b[key + '_bytes'] / s[key + '_bytes']:.1f}x bytes",
                target="bytes flat in run size",
                met=b[key + "_bytes"] < 2 * s[key + "_bytes"],
            )
        for n in (small, large):
            summary.add(
                benchmark="run_page",
                figure=f"WebSocket update vs whole run, {n:,} cases",
                value=f"{at[n]['update_ms']:.1f} ms, {kb(at[n]['update_bytes'])}",
                baseline=f"{at[n]['before_ms']:.1f} ms, {kb(at[n]['before_bytes'])} whole run",
                ratio=f"{at[n]['before_bytes'] / at[n]['update_bytes']:.0f}x fewer bytes",
                target="-",
            )
        summary.add(
            benchmark="run_page",
            figure=f"WebSocket idle pass, {large:,} cases",
            value=f"{b['idle_ms']:.2f} ms",
            baseline=f"{s['idle_ms']:.2f} ms at {small:,}",
            ratio=f"{b['idle_ms'] / s['idle_ms']:.1f}x" if s["idle_ms"] else "-",
            target="-",
        )
        summary.notes.append(
            "the update's time includes the run's summary (aggregates over every result), "
            "recomputed when a result settles; its bytes do not grow with the run"
        )
    finish(summary, args)


if __name__ == "__main__":
    main()
