"""Runner overhead: trivial cases through the real runner CLI beside bare process spawns.

Whole path: a run of N cases (`/bin/echo ok`, graded `contains` "ok") dispatched through the
REST API to a daphne process, and one real runner — `python -m runnercli run --max-concurrent 8
--allow-any`, paired through the services, with its own config file — leasing, running and
reporting them over MCP; timed from the dispatch to the run's `succeeded` (every case scored).

Baseline, in the same run: a bare asyncio loop spawning the same N processes
(`asyncio.create_subprocess_exec("/bin/echo", "ok")`, output read), 8 at a time. Target: the
runner at ≥ 40 % of the bare rate. Beside it: MCP calls per case (POST /mcp lines in daphne's
access log) and CPU seconds per case of the server process and of the runner process, and
PostgreSQL's (its server processes, when on this machine), the machine's busy share meanwhile
and the most its cores allow at what a case costs in all these processes; and each pipeline
stage's wall time per case as the runner clocks it (`EVERDICT_STAGE_TIMES`), and how long a
case held its slot, so how many of the slots were running a case on average (fewer than all:
the runner waited for leases; all, and the rate still short: the machine's CPU bounds it);
how the runner's and the server's main threads spent the run, on a core, waiting for one or
idle (Linux's scheduler statistics: a runner thread seldom idle bounds the rate itself);
what a stage the case does not use (repo, services, trace, screens, files) costs it, target
≈ 0, beside a bare spawn's time in its slot: the costliest of those the pipeline has, at
most a twentieth of it. `deliver` includes the wait for the server to
take the report, which no longer holds the slot; wall times include waiting for the event
loop, busy with the other cases.

    .venv/bin/python bench/runner_overhead.py [--cases 400] [--concurrency 8] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from databases import ROOT, Scratch, add_database_arguments, scratch_database
from report import Summary, finish, machine_line
from seeding import Member, pair_runners, seed_member
from servers import Server, daphne, server_env

from everdict.processes import Proc, spawn

ECHO_SPEC: dict[str, Any] = {
    "command": ["/bin/echo", "ok"],
    "timeout_s": 60,
    "output": "text",
    "grader": {"type": "contains"},
}
TARGET = 0.40
# The stages an echo case does not use: what each costs it is held to a twentieth of a bare
# spawn's time in its slot (≈ 0, made a figure that can fail).
UNUSED_STAGES = ("agent-config", "artifacts", "files", "screens", "trace")
UNUSED_TARGET = 0.05


@dataclass(frozen=True)
class Sched:
    """A thread's seconds on a core and waiting for one (`/proc/PID/task/TID/schedstat`)."""

    ran: float
    waited: float

    def __sub__(self, other: Sched) -> Sched:
        return Sched(self.ran - other.ran, self.waited - other.waited)


@dataclass
class Measured:
    cases: int
    seconds: float
    mcp_calls: int = 0
    # `lease_job` calls among them that leased at least one job (the server's counter).
    lease_calls: int = 0
    server_cpu_s: float = 0.0
    # The runner's (or the bare loop's) own CPU, and its case processes' (reaped children).
    runner_cpu_s: float = 0.0
    cases_cpu_s: float = 0.0
    # PostgreSQL's server processes on this machine (None when it is elsewhere), and the
    # share of the machine's cores busy meanwhile, whoever kept them busy.
    database_cpu_s: float | None = None
    busy: float = 0.0
    # The run measured (the runner's slot times are kept by run).
    run_id: int | None = None
    # The seconds the runner's and the server's main threads ran and waited for a core
    # meanwhile (the kernel's scheduler counters; None where there are none to read).
    runner_thread: Sched | None = None
    server_thread: Sched | None = None

    @property
    def rate(self) -> float:
        return self.cases / self.seconds if self.seconds else 0.0


# ------------------------------------------------------------------------ baseline


async def _bare(cases: int, concurrency: int) -> float:
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            proc = await asyncio.create_subprocess_exec(
                "/bin/echo", "ok", stdout=asyncio.subprocess.PIPE
            )
            out, _ = await proc.communicate()
            if proc.returncode != 0 or b"ok" not in out:
                raise RuntimeError("/bin/echo ok failed")

    began = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(cases)))
    return time.perf_counter() - began


def measure_bare(cases: int, concurrency: int) -> Measured:
    own, children = _rusage(resource.RUSAGE_SELF), _rusage(resource.RUSAGE_CHILDREN)
    seconds = asyncio.run(_bare(cases, concurrency))
    return Measured(
        cases=cases,
        seconds=seconds,
        runner_cpu_s=_rusage(resource.RUSAGE_SELF) - own,
        cases_cpu_s=_rusage(resource.RUSAGE_CHILDREN) - children,
    )


def _rusage(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


# ------------------------------------------------------------------------ whole path


def _lease_calls(server: Server) -> int:
    """`lease_job` calls the server has answered with jobs (`everdict_lease_calls_total`)."""
    import urllib.request

    with urllib.request.urlopen(f"{server.url}/metrics", timeout=30) as reply:
        text = reply.read().decode()
    return sum(
        int(float(line.rpartition(" ")[2]))
        for line in text.splitlines()
        if line.startswith("everdict_lease_calls_total{") and 'outcome="job"' in line
    )


def _mcp_posts(server: Server) -> int:
    """POST /mcp requests daphne has logged so far (its access log goes to its stdout)."""
    try:
        text = server.log.read_text(errors="replace")
    except FileNotFoundError:
        return 0
    return sum(1 for line in text.splitlines() if '"POST /mcp' in line)


def _write_config(path: Path, server: Server, runner_id: int, token: str) -> None:
    from runnercli.config import RunnerConfig, config_save

    config_save(
        path,
        RunnerConfig(
            server=server.url,
            token=token,
            runner_id=runner_id,
            label="overhead",
            capabilities=["python"],
        ),
    )


def start_runner(
    scratch: Scratch, config: Path, concurrency: int, stage_times: Path | None = None
) -> Proc:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update({"PYTHONUNBUFFERED": "1", "NO_COLOR": "1", "PYTHONPATH": str(ROOT)})
    if stage_times is not None:
        env["EVERDICT_STAGE_TIMES"] = str(stage_times)
    args = [
        sys.executable,
        "-m",
        "runnercli",
        "run",
        "--config",
        str(config),
        "--max-concurrent",
        str(concurrency),
        "--allow-any",
    ]
    return spawn(args, scratch.workdir / "runner.log", env)


def _wait_connected(runner: Proc, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if runner.popen.poll() is not None:
            raise RuntimeError("the runner exited:\n" + runner.log.read_text()[-3000:])
        if "connected to" in runner.log.read_text(errors="replace"):
            return
        time.sleep(0.05)
    raise RuntimeError("the runner did not connect:\n" + runner.log.read_text()[-3000:])


def measure_runner(
    scratch: Scratch,
    server: Server,
    member: Member,
    runner: Proc,
    suite: str,
    cases: int,
    profile: Path | None,
) -> Measured:
    import httpx2
    import psutil

    headers = {"Authorization": f"Bearer {member.api_key}"}
    runner_ps = psutil.Process(runner.popen.pid)
    time.sleep(0.5)  # the runner's first long-poll is parked on the empty queue
    spies = (
        [
            _py_spy(runner.popen.pid, profile / "runner.txt"),
            _py_spy(server.popen.pid, profile / "server.txt"),
        ]
        if profile
        else []
    )
    calls_before, leases_before = _mcp_posts(server), _lease_calls(server)
    server_before = server.cpu_seconds()
    runner_before, cases_before = _cpu(runner_ps)
    database = _database_cpu if scratch.is_postgres else lambda: None
    database_before, machine_before = database(), _machine_cpu()
    with httpx2.Client(base_url=server.url, headers=headers, timeout=60) as http:
        threads_before = _main_thread(runner.popen.pid), _main_thread(server.popen.pid)
        began = time.perf_counter()
        reply = http.post(
            f"/api/workspaces/{member.slug}/runs",
            json={"harness": suite, "dataset": suite, "runtime": "self:any", "concurrency": 256},
        )
        reply.raise_for_status()
        run_id = reply.json()["id"]
        status = ""
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            status = _run_status(run_id)
            if status in ("succeeded", "failed", "canceled"):
                break
            time.sleep(0.01)
        took = time.perf_counter() - began
        threads_after = _main_thread(runner.popen.pid), _main_thread(server.popen.pid)
    server_cpu = server.cpu_seconds() - server_before
    runner_after, cases_after = _cpu(runner_ps)
    database_after, machine_after = database(), _machine_cpu()
    for spy in spies:
        spy.popen.send_signal(signal.SIGINT)
        spy.popen.wait(30)
    time.sleep(0.3)  # daphne's access log is flushed
    calls, leases = _mcp_posts(server) - calls_before, _lease_calls(server) - leases_before
    if status != "succeeded":
        raise RuntimeError(
            f"run {run_id} is {status or 'still running'}:\n" + runner.log.read_text()[-3000:]
        )
    scored = _scored(run_id)
    if scored != cases:
        raise RuntimeError(f"{scored} of {cases} cases scored pass")
    return Measured(
        cases=cases,
        seconds=took,
        mcp_calls=calls,
        lease_calls=leases,
        server_cpu_s=server_cpu,
        runner_cpu_s=runner_after - runner_before,
        cases_cpu_s=cases_after - cases_before,
        database_cpu_s=(
            None
            if database_before is None or database_after is None
            else database_after - database_before
        ),
        busy=(machine_after - machine_before) / took / (os.cpu_count() or 1),
        run_id=run_id,
        runner_thread=_spent(threads_before[0], threads_after[0]),
        server_thread=_spent(threads_before[1], threads_after[1]),
    )


def _main_thread(pid: int) -> Sched | None:
    """What the process's main thread has spent on a core and waiting for one, in seconds
    (Linux's scheduler statistics; None elsewhere)."""
    try:
        ran_ns, waited_ns, *_ = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()
    except (OSError, ValueError):
        return None
    return Sched(int(ran_ns) / 1e9, int(waited_ns) / 1e9)


def _spent(before: Sched | None, after: Sched | None) -> Sched | None:
    return None if before is None or after is None else after - before


def _threads(whole: Measured) -> str:
    """How the runner's and the server's main threads spent the run: on a core, waiting for
    one, idle. The runner's one thread runs every case's Python: the less of the run it is
    idle, the more its cost a case bounds the rate, whatever the slots and the machine's
    cores have to spare."""
    parts = []
    for name, spent in (("runner", whole.runner_thread), ("server", whole.server_thread)):
        if spent is None or not whole.seconds:
            continue
        ran, waited = spent.ran / whole.seconds, spent.waited / whole.seconds
        parts.append(
            f"the {name}'s main thread ran {ran:.0%} of the run and waited for a core"
            f" {waited:.0%} more (idle {max(0.0, 1 - ran - waited):.0%})"
        )
    return "; ".join(parts) if parts else "main threads: no scheduler statistics here"


def _run_status(run_id: int) -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT status FROM scorecards_run WHERE id = %s", [run_id])
        row = cursor.fetchone()
    return str(row[0]) if row else ""


def _scored(run_id: int) -> int:
    from scorecards.models import CaseResult

    return CaseResult.objects.filter(run_id=run_id, verdict="pass").count()


def _cpu(process: Any) -> tuple[float, float]:
    """The process's own CPU seconds, and its reaped children's."""
    times = process.cpu_times()
    return times.user + times.system, times.children_user + times.children_system


def _ceiling(whole: Measured, bare: Measured) -> str:
    """What the machine was doing, and the most its cores allow at what a case costs."""
    cores = os.cpu_count() or 1
    spent = whole.server_cpu_s + whole.runner_cpu_s + whole.cases_cpu_s
    spent += whole.database_cpu_s or 0.0
    per_case_ms = spent / (whole.cases or 1) * 1000
    most = cores * 1000 / per_case_ms if per_case_ms else 0.0
    return (
        f"the machine {whole.busy:.0%} busy on its {cores} cores meanwhile; a case costs"
        f" {per_case_ms:.2f} ms of CPU in these processes, so {cores} cores fully used allow"
        f" at most {most:.0f} cases/s ({most / bare.rate:.0%} of bare)"
    )


def _database_cpu() -> float | None:
    """CPU seconds of the PostgreSQL server processes on this machine (None when there are
    none this user may read: the database is elsewhere, or on SQLite)."""
    import psutil

    total, seen = 0.0, False
    for process in psutil.process_iter(["name"]):
        if process.info["name"] != "postgres":
            continue
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
        seen = True
    return total if seen else None


def _machine_cpu() -> float:
    """CPU seconds the machine's cores spent busy, by anyone."""
    import psutil

    times = psutil.cpu_times()
    return float(
        times.user
        + times.system
        + getattr(times, "nice", 0.0)
        + getattr(times, "irq", 0.0)
        + getattr(times, "softirq", 0.0)
    )


def _py_spy(pid: int, out: Path) -> Proc:
    # Beside the interpreter running this (a checkout's own venv, or one it links to).
    spy = Path(sys.executable).parent / "py-spy"
    if not spy.exists():
        spy = ROOT / ".venv" / "bin" / "py-spy"
    args = [str(spy), "record", "--pid", str(pid), "--format", "raw", "--rate", "250"]
    args += ["--nonblocking", "--gil", "--output", str(out)]
    return spawn(args, out.with_suffix(".log"), dict(os.environ))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=400, help="cases in the run (400)")
    parser.add_argument("--concurrency", type=int, default=8, help="--max-concurrent (8)")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        type=Path,
        default=None,
        help="sample the runner and the server with py-spy (folded stacks into DIR)",
    )
    add_database_arguments(parser)
    args = parser.parse_args()

    summary = Summary("runner overhead: the real runner CLI vs bare process spawns")
    with scratch_database(args) as scratch:
        print(f"runner_overhead — {machine_line(scratch)}")
        member = seed_member()
        seed_echo_suite(member, "warmup", args.concurrency)
        seed_echo_suite(member, "echo", args.cases)
        ((runner_id, token),) = pair_runners(member.user, 1, label="overhead")
        config = scratch.workdir / "runner.json"
        with daphne(scratch, **server_env(args)) as server:
            _write_config(config, server, runner_id, token)
            stage_times = scratch.workdir / "stages.json"
            runner = start_runner(scratch, config, args.concurrency, stage_times)
            try:
                _wait_connected(runner)
                # A first small run warms the server's and the runner's code paths.
                measure_runner(scratch, server, member, runner, "warmup", args.concurrency, None)
                bare_before = measure_bare(args.cases, args.concurrency)
                whole = measure_runner(
                    scratch, server, member, runner, "echo", args.cases, args.profile
                )
                bare_after = measure_bare(args.cases, args.concurrency)
            finally:
                runner.stop(grace_s=15)
        times = _read_stage_times(stage_times)
    # The baseline on either side of the whole path: the better of the two.
    bare = min(bare_before, bare_after, key=lambda m: m.seconds)
    ratio = whole.rate / bare.rate
    per_case = whole.cases or 1
    print(
        f"\nbare spawns, {args.concurrency} at a time: {bare.cases} in {bare.seconds:.3f} s ="
        f" {bare.rate:.0f}/s (before {bare_before.rate:.0f}/s, after {bare_after.rate:.0f}/s)"
    )
    print(
        f"runner CLI, --max-concurrent {args.concurrency}: {whole.cases} cases in"
        f" {whole.seconds:.3f} s = {whole.rate:.1f} cases/s ({ratio:.1%} of bare);"
        f" {whole.mcp_calls / per_case:.2f} MCP calls/case ({whole.mcp_calls} POST /mcp,"
        f" {whole.lease_calls} of them leases)"
    )
    print(
        f"CPU per case: server {whole.server_cpu_s / per_case * 1000:.2f} ms; runner"
        f" {whole.runner_cpu_s / per_case * 1000:.2f} ms (bare loop"
        f" {bare.runner_cpu_s / bare.cases * 1000:.2f} ms); the cases' processes"
        f" {whole.cases_cpu_s / per_case * 1000:.2f} ms (bare"
        f" {bare.cases_cpu_s / bare.cases * 1000:.2f} ms)"
        + (
            ""
            if whole.database_cpu_s is None
            else f"; PostgreSQL {whole.database_cpu_s / per_case * 1000:.2f} ms"
        )
    )
    ceiling = _ceiling(whole, bare)
    print(ceiling)
    occupancy = _occupancy(times, whole, args.concurrency)
    print(occupancy)
    threads = _threads(whole)
    print(threads)
    stages = _stage_lines(times, bare, args.concurrency)
    for line in stages:
        print(line)
    summary.add(
        benchmark="runner_overhead",
        figure=f"runner CLI, {args.cases} echo cases, {args.concurrency} at once",
        value=f"{whole.rate:.0f} cases/s",
        baseline=f"{bare.rate:.0f}/s bare asyncio spawns",
        ratio=f"{ratio:.1%}",
        target=f">= {TARGET:.0%}",
        met=ratio >= TARGET,
    )
    if (unused := _costliest_unused(times)) is not None:
        name, ms = unused
        per_spawn = _spawn_in_slot_ms(bare, args.concurrency)
        summary.add(
            benchmark="runner_overhead",
            figure="the costliest stage an echo case does not use, wall a case",
            value=f"{name} {ms:.3f} ms",
            baseline=f"a bare spawn in its slot {per_spawn:.2f} ms",
            ratio=f"{ms / per_spawn:.1%}" if per_spawn else "-",
            target=f"<= {UNUSED_TARGET:.0%}",
            met=bool(per_spawn) and ms <= UNUSED_TARGET * per_spawn,
        )
    summary.notes.append(
        f"{whole.mcp_calls / per_case:.2f} MCP calls per case"
        f" ({whole.lease_calls / per_case:.2f} leases);"
        f" CPU per case: server {whole.server_cpu_s / per_case * 1000:.2f} ms,"
        f" runner {whole.runner_cpu_s / per_case * 1000:.2f} ms"
        f" (bare loop {bare.runner_cpu_s / bare.cases * 1000:.2f} ms);"
        f" {_stage_note(times)}"
    )
    summary.notes.append(ceiling)
    summary.notes.append(occupancy)
    summary.notes.append(threads)
    finish(summary, args)


def _stage_ms(times: dict[str, Any]) -> dict[str, float]:
    """Each stage's wall ms a case, from the runner's stage times."""
    cases = times["cases"] or 1
    return {name: seconds / cases * 1000 for name, seconds in times["seconds"].items()}


def _stage_note(times: dict[str, Any] | None) -> str:
    if times is None:
        return "no stage times"
    parts = [f"{name} {ms:.2f}" for name, ms in sorted(_stage_ms(times).items())]
    return "wall ms per case by stage: " + ", ".join(parts)


def _costliest_unused(times: dict[str, Any] | None) -> tuple[str, float] | None:
    """The stage of `UNUSED_STAGES` that cost a case most, and its wall ms a case."""
    if times is None:
        return None
    stage_ms = _stage_ms(times)
    clocked = [(stage_ms[name], name) for name in UNUSED_STAGES if name in stage_ms]
    if not clocked:
        return None
    ms, name = max(clocked)
    return name, ms


def _occupancy(times: dict[str, Any] | None, whole: Measured, concurrency: int) -> str:
    """How long a case of the measured run held its slot (the runner's own figure), and so
    how many slots were running one of its cases on average over the run."""
    held = (times or {}).get("slot_seconds", {}).get(str(whole.run_id))
    if held is None or not whole.cases:
        return "slots: the runner wrote no slot times for the run"
    return (
        f"a case held its slot {held / whole.cases * 1000:.1f} ms: on average"
        f" {held / whole.seconds:.1f} of the {concurrency} slots were running a case"
    )


def _spawn_in_slot_ms(bare: Measured, concurrency: int) -> float:
    """A bare spawn's wall time in its slot (ms)."""
    return bare.seconds / bare.cases * concurrency * 1000 if bare.cases else 0.0


def _read_stage_times(path: Path) -> dict[str, Any] | None:
    import json

    try:
        return dict(json.loads(path.read_text()))
    except (FileNotFoundError, ValueError):
        return None


def _stage_lines(times: dict[str, Any] | None, bare: Measured, concurrency: int) -> list[str]:
    """Each pipeline stage's wall time per case (its hooks, summed), the runner's own figure
    (`EVERDICT_STAGE_TIMES`), beside a bare spawn's wall time in its slot."""
    if times is None:
        return ["stage times: the runner wrote none"]
    per_spawn = _spawn_in_slot_ms(bare, concurrency)
    lines = [f"per stage, wall ms per case ({times['cases']} cases, warm-up included):"]
    for name, ms in sorted(_stage_ms(times).items(), key=lambda kv: -kv[1]):
        lines.append(f"  {name:<10} {ms:8.3f} ms")
    lines.append(f"  (a bare spawn in its slot, same run: {per_spawn:.3f} ms)")
    return lines


def seed_echo_suite(member: Member, name: str, cases: int) -> None:
    """A harness running `/bin/echo ok` and a dataset of `cases` cases expecting "ok"."""
    from scorecards.services import dataset_create, harness_create

    harness_create(user=member.user, workspace_slug=member.slug, name=name, spec=ECHO_SPEC)
    dataset_create(
        user=member.user,
        workspace_slug=member.slug,
        name=name,
        cases=[{"key": f"c{i}", "input": {"i": i}, "expected": "ok"} for i in range(cases)],
    )


if __name__ == "__main__":
    main()
