"""Graders cannot stall the server: pathological `regex` grades, and another member's API
call meanwhile.

In this process: the server's grader (RE2) judging `^(a+)+$` against 34 `a`s and a `!`, and
`.*error.*timeout` against a 1 MiB one-line JSON output. Baseline, in the same run: Python's
backtracking `re` on the same pattern with fewer `a`s — its time grows by a constant factor
with each one, so the figure at 34 is extrapolated from the growth measured (measuring it
would take minutes to hours, during which that process serves nobody).

Through a daphne over a scratch database: another member's `GET /api/runners`, p50/p99,
while a runner (a process of its own) submits such results back to back, each graded by the
server, timed until the last is acknowledged; baseline, in the same run: the same call with
the server otherwise idle, after 20 untimed. Beside it, after as many results submitted
untimed, the same call while as many results are submitted whose output the pattern matches
at once (34 `a`s): what the load of the reports costs the call, whatever they hold.
Targets: grading at 34 `a`s within 1 ms; the call's p99 under grading at most 3 times its idle p99.

Regrade: a finished run of 1,000 stored outputs (written in bulk) scored again by another
version's `regex` grader through the service, beside grading the same outputs in memory (the
grader alone). Target: within 5 s (5 ms a result).

    .venv/bin/python bench/grading.py [--results 40] [--calls 200] [--regrade-results 1000]
        [--sqlite]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import re
import time
from typing import Any

from databases import add_database_arguments, scratch_database
from mcp_runner import leased_jobs, mcp_session
from report import Summary, finish, machine_line
from seeding import seed_member, seed_suite
from servers import daphne, server_env
from stats import latency_line, pct

CATASTROPHIC = r"^(a+)+$"
PATHOLOGICAL = "a" * 34 + "!"
# An output the pattern matches at once: the same load of reports, nothing pathological.
BENIGN = "a" * 34
SCAN = ".*error.*timeout"
WARMUP_CALLS = 20
BIG_OUTPUT = json.dumps({"log": "error " * 174_000})[: 1024 * 1024]


def best_of(fn: Any, tries: int = 5) -> float:
    times = []
    for _ in range(tries):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return min(times)


def grading_figures(summary: Summary) -> None:
    from runnercli.protocol import HarnessSpec
    from scorecards.scoring import grade

    spec = HarnessSpec.model_validate({"command": ["run"], "grader": {"type": "regex"}})

    def judge(output: str, pattern: str) -> None:
        grade(spec=spec, status="completed", output=output, exit_code=0, expected=pattern)

    re2_34 = best_of(lambda: judge(PATHOLOGICAL, CATASTROPHIC))
    re2_big = best_of(lambda: judge(BIG_OUTPUT, SCAN))
    backtracking = {
        n: best_of(lambda n=n: re.search(CATASTROPHIC, "a" * n + "!"), 1) for n in (16, 18, 20, 22)
    }
    print(f"RE2 (the server's grader), 34 a's + '!':  {re2_34 * 1000:.3f} ms")
    print(f"RE2, {SCAN!r} over a 1 MiB JSON line:  {re2_big * 1000:.3f} ms")
    for n, seconds in backtracking.items():
        print(f"baseline: Python's re, {n} a's + '!':        {seconds * 1000:.1f} ms")
    # Extrapolated with the growth measured per `a` between 16 and 22.
    growth = (backtracking[22] / backtracking[16]) ** (1 / 6)
    at_34 = backtracking[22] * growth ** (34 - 22)
    summary.add(
        benchmark="grading",
        figure="regex ^(a+)+$ vs 34 a's + '!'",
        value=f"{re2_34 * 1000:.3f} ms (RE2)",
        baseline=f"backtracking re: {backtracking[22] * 1000:.0f} ms at 22, ~{at_34:.0f} s at 34",
        ratio=f"{at_34 / re2_34:.0e}x" if re2_34 else "-",
        target="<= 1 ms",
        met=re2_34 <= 0.001,
    )
    summary.add(
        benchmark="grading",
        figure=f"regex {SCAN} over 1 MiB",
        value=f"{re2_big * 1000:.1f} ms (RE2)",
        baseline="-",
        ratio="-",
        target="-",
    )


# Per stored result, the most a regrade may take: 1,000 within 5 s.
REGRADE_TARGET_MS = 5.0


def regrade_figures(summary: Summary, member: Any, results: int) -> None:
    """A finished run's stored outputs scored again by another version's `regex` grader,
    beside grading the same outputs in memory (the grader alone, no database)."""
    from bulk import ECHO, seeded_run

    from runnercli.protocol import HarnessSpec
    from scorecards.scoring import grade
    from scorecards.services import harness_create
    from scorecards.verdicts.regrades import run_regrade

    def output(case: int, repeat: int) -> str:
        return f"wrong {case}" if case % 2 else f"answer {case}"

    run = seeded_run(member.user, slug=member.slug, name="bulk", cases=results, output=output)
    regex = {**ECHO, "grader": {"type": "regex"}}
    version = harness_create(user=member.user, workspace_slug=member.slug, name="bulk", spec=regex)
    spec = HarnessSpec.model_validate(regex)
    began = time.perf_counter()
    for case in range(results):
        expected = f"answer {case}"
        grade(spec=spec, status="completed", output=output(case, 0), exit_code=0, expected=expected)
    in_memory = time.perf_counter() - began
    began = time.perf_counter()
    done = run_regrade(user=member.user, run_id=run.pk, harness_version=version.version)
    took = time.perf_counter() - began
    assert (done.regraded, done.changed) == (results, results // 2), done
    summary.add(
        benchmark="grading",
        figure=f"regrade of {results:,} stored results (regex grader)",
        value=f"{took:.2f} s",
        baseline=f"{in_memory * 1000:.1f} ms grading the same outputs in memory",
        ratio=f"{took / in_memory:.0f}x" if in_memory else "-",
        target=f"<= {results * REGRADE_TARGET_MS / 1000:g} s",
        met=took * 1000 <= results * REGRADE_TARGET_MS,
    )


async def other_members_calls(url: str, key: str, calls: int, until: Any = None) -> list[float]:
    """Seconds of each of `calls` sequential calls (fewer, when the event `until` is set
    before they are all made)."""
    import httpx2

    seconds = []
    async with httpx2.AsyncClient(
        base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60
    ) as client:
        for _ in range(calls):
            if until is not None and until.is_set():
                break
            began = time.perf_counter()
            (await client.get("/api/runners")).raise_for_status()
            seconds.append(time.perf_counter() - began)
    return seconds


async def submit_results(url: str, token: str, results: int, output: str, ready: Any) -> None:
    """Lease and submit `results` results of `output`, one call each, back to back."""
    async with mcp_session(url, token) as client:
        ready.set()
        done = 0
        while done < results:
            reply = await client.call_tool(
                "lease_job", {"protocol": 2, "max_jobs": 32, "wait_ms": 2000}
            )
            for job in leased_jobs(reply.structured_content):
                fence = {"job_id": job["job_id"], "lease_epoch": job["lease_epoch"]}
                result = {"status": "completed", "exit_code": 0, "output": output}
                ack = await client.call_tool("submit_job_result", {**fence, "result": result})
                if ack.is_error or not (ack.structured_content or {}).get("accepted"):
                    raise RuntimeError(f"submit_job_result: {ack}")
                done += 1


def submitting_process(
    url: str, token: str, results: int, output: str, ready: Any, finished: Any
) -> None:
    """The runner submitting the results, in a process of its own."""
    try:
        asyncio.run(submit_results(url, token, results, output, ready))
    finally:
        finished.set()


def under_grading(
    url: str, key: str, token: str, results: int, output: str, calls: int
) -> list[float]:
    """The other member's calls made while results of `output` are submitted and graded: the
    runner is a process of its own (its MCP client neither shares this process's event loop
    nor its GIL with the calls timed), and its session is open before the first call."""
    ctx = mp.get_context("spawn")
    ready, finished = ctx.Event(), ctx.Event()
    child = ctx.Process(
        target=submitting_process,
        args=(url, token, results, output, ready, finished),
        daemon=True,
    )
    child.start()
    try:
        deadline = time.monotonic() + 60
        while not ready.wait(0.1):
            if not child.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the runner's MCP session did not open")
        measured = asyncio.run(other_members_calls(url, key, calls, until=finished))
    finally:
        child.join(120)
    if child.exitcode != 0:
        raise RuntimeError(f"the submitting runner exited {child.exitcode}")
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=int, default=40, help="pathological results (40)")
    parser.add_argument("--calls", type=int, default=200, help="measured API calls (200)")
    parser.add_argument(
        "--regrade-results", type=int, default=1000, help="stored results regraded (1000)"
    )
    add_database_arguments(parser)
    args = parser.parse_args()
    summary = Summary("grading: pathological patterns stall no one")
    grading_figures(summary)
    with scratch_database(args) as scratch:
        print(f"grading — {machine_line(scratch)}")
        member = seed_member()
        other = seed_member("other", "other")
        regrade_figures(summary, member, args.regrade_results)
        spec = {"command": ["true"], "grader": {"type": "regex"}}
        seed_suite(member, name="grep", cases=args.results, spec=spec)
        from runners.services import runner_pair
        from scorecards.models import Case
        from scorecards.services import run_start

        Case.objects.update(expected=CATASTROPHIC)  # the pattern every case is graded by
        token = runner_pair(owner=member.user, label="bench").token
        with daphne(scratch, **server_env(args)) as server:

            def graded(output: str) -> list[float]:
                """A run of the suite's cases started, then its results of `output` graded."""
                run_start(
                    user=member.user,
                    workspace_slug=member.slug,
                    harness="grep",
                    dataset="grep",
                    runtime="self:any",
                    concurrency=args.results,
                )
                return under_grading(
                    server.url, other.api_key, token, args.results, output, args.calls
                )

            # Untimed first: the connection's and the process's first requests.
            asyncio.run(other_members_calls(server.url, other.api_key, WARMUP_CALLS))
            idle = asyncio.run(other_members_calls(server.url, other.api_key, args.calls))
            # The submissions' own first calls untimed (the server's path warm for both loads),
            # then the same load of results whose output the pattern matches at once.
            graded(BENIGN)
            benign = graded(BENIGN)
            busy = graded(PATHOLOGICAL)
    print(latency_line("another member's GET /api/runners, server idle", idle))
    print(latency_line("  ... while as many benign results are graded", benign))
    print(latency_line("  ... while pathological results are graded", busy))
    summary.add(
        benchmark="grading",
        figure="another member's API call p50 / p99 while graded",
        value=f"{pct(busy, 50) * 1000:.1f} / {pct(busy, 99) * 1000:.1f} ms",
        baseline=f"idle {pct(idle, 50) * 1000:.1f} / {pct(idle, 99) * 1000:.1f} ms",
        ratio=f"p99 {pct(busy, 99) / pct(idle, 99):.1f}x",
        target="p99 <= 3x idle",
        met=pct(busy, 99) <= 3 * pct(idle, 99),
    )
    summary.notes.append(
        f"{args.results} results of 34 a's + '!' graded by ^(a+)+$ while {len(busy)} calls ran "
        "(each before the last result's ack); "
        f"while as many benign ones (34 a's) were: p50 {pct(benign, 50) * 1000:.1f} ms, "
        f"p99 {pct(benign, 99) * 1000:.1f} ms ({len(benign)} calls)"
    )
    finish(summary, args)


if __name__ == "__main__":
    main()
