"""Judging: the time from a case's completion to its judged verdict, with an idle runner and
a trivial judge, beside the same cases graded `contains` on the same runner.

Two runs of the same N cases (`/bin/echo ok`) through daphne and one real runner
(`python -m runnercli run --max-concurrent 1 --allow-any`): one graded `contains` "ok",
one graded by a judge whose command is `/bin/echo` of a fixed `{"pass", "score",
"reason"}`. For the judged run, each case's completion (its result stored, `judging`) to
its verdict (the judge's answer read); for the `contains` run, each case's whole round
(lease → verdict), which is what a judge job adds at the least: one more job through the
queue. Medians and p90 over the cases.

    .venv/bin/python bench/judging.py [--cases 40]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from databases import add_database_arguments, scratch_database
from report import Summary, finish, machine_line
from runner_overhead import _run_status, _wait_connected, _write_config, start_runner
from seeding import Member, pair_runners, seed_member, seed_suite
from servers import daphne, server_env

ANSWER = json.dumps({"pass": True, "score": 1.0, "reason": "trivial judge"})
CONTAINS: dict[str, Any] = {
    "command": ["/bin/echo", "ok"],
    "timeout_s": 60,
    "grader": {"type": "contains"},
}
JUDGED: dict[str, Any] = {
    **CONTAINS,
    "grader": {
        "type": "judge",
        "rubric": "Is it ok?",
        "judge": {"command": ["/bin/echo", ANSWER], "capabilities": []},
    },
}
# What a judge may add beside a trivial case's round, at most.
TARGET_RATIO = 3.0


def run_to_end(server_url: str, member: Member, name: str) -> int:
    import httpx2

    headers = {"Authorization": f"Bearer {member.api_key}"}
    with httpx2.Client(base_url=server_url, headers=headers, timeout=60) as http:
        reply = http.post(
            f"/api/workspaces/{member.slug}/runs",
            json={"harness": name, "dataset": name, "runtime": "self:any"},
        )
        reply.raise_for_status()
        run_id = int(reply.json()["id"])
    deadline = time.monotonic() + 600
    while _run_status(run_id) not in ("succeeded", "failed", "canceled"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} did not finish")
        time.sleep(0.02)
    if _run_status(run_id) != "succeeded":
        raise RuntimeError(f"run {run_id} is {_run_status(run_id)}")
    return run_id


def judged_delays_ms(run_id: int) -> list[float]:
    """Per case: its result stored (completion) → its last judgement read (the verdict)."""
    from django.db.models import Max

    from scorecards.models import CaseResult

    rows = CaseResult.objects.filter(run_id=run_id).annotate(decided=Max("judgements__settled_at"))
    return [(row.decided - row.created_at).total_seconds() * 1000 for row in rows]


def round_ms(run_id: int) -> list[float]:
    """Per case: its attempt leased → its verdict stored."""
    from scorecards.models import CaseResult

    rows = CaseResult.objects.filter(run_id=run_id).select_related("attempt")
    return [
        (row.created_at - row.attempt.started_at).total_seconds() * 1000
        for row in rows
        if row.attempt is not None
    ]


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=40, help="cases in each run (40)")
    add_database_arguments(parser)
    args = parser.parse_args()

    summary = Summary("judging: completion → judged verdict beside a contains-graded case")
    with scratch_database(args) as scratch:
        print(f"judging — {machine_line(scratch)}")
        member = seed_member()
        seed_suite(member, name="warmup", spec=JUDGED, cases=3, expected="ok")
        seed_suite(member, name="contains", spec=CONTAINS, cases=args.cases, expected="ok")
        seed_suite(member, name="judged", spec=JUDGED, cases=args.cases, expected="ok")
        ((runner_id, token),) = pair_runners(member.user, 1, label="judging")
        config = scratch.workdir / "runner.json"
        with daphne(scratch, **server_env(args)) as server:
            _write_config(config, server, runner_id, token)
            runner = start_runner(scratch, config, 1)
            try:
                _wait_connected(runner)
                run_to_end(server.url, member, "warmup")
                contains = round_ms(run_to_end(server.url, member, "contains"))
                judged = judged_delays_ms(run_to_end(server.url, member, "judged"))
            finally:
                runner.stop(grace_s=15)
    median_judged, median_round = statistics.median(judged), statistics.median(contains)
    ratio = median_judged / median_round if median_round else 0.0
    print(
        f"\ncompletion → judged verdict: median {median_judged:.1f} ms, p90 {p90(judged):.1f} ms"
        f" over {len(judged)} cases; a contains case's round (lease → verdict): median"
        f" {median_round:.1f} ms, p90 {p90(contains):.1f} ms"
    )
    summary.add(
        benchmark="judging",
        figure=f"completion → judged verdict, idle runner, trivial judge ({len(judged)} cases)",
        value=f"{median_judged:.1f} ms median",
        baseline=f"{median_round:.1f} ms: a contains case, lease → verdict",
        ratio=f"{ratio:.2f}x",
        target=f"<= {TARGET_RATIO:.0f}x",
        met=ratio <= TARGET_RATIO,
    )
    summary.notes.append(f"p90: judged {p90(judged):.1f} ms, contains round {p90(contains):.1f} ms")
    finish(summary, args)


if __name__ == "__main__":
    main()
