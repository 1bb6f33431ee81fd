"""Chaos soak: a production-shaped cluster loses no job and accepts no fenced-off result.

Two daphne replicas and two schedulers over one PostgreSQL (and one Redis), 20 runner CLI
processes with `--max-concurrent` 1-4, a few thousand jobs in several `self:any` runs of
concurrency 10-50, and a harness that is a small Python script that counts its own
executions, sleeps as long as its case says (mostly 0-200 ms; a share of cases take
seconds, as agent sessions take minutes) and prints its input. The idle timeout is short
(20 s), so a queue waiting behind long cases or a sleeping runner would reach it if it
counted queue age. While the jobs run, chaos strikes at random: a runner is `kill -9`ed
and started again with the same token; a runner is `SIGSTOP`ped past its lease TTL and
resumed (its late calls must be refused by the fence, unless it takes back a lease nobody
took); a laptop sleeps — a runner and the cases it runs are stopped past the lease, then
continued; a replica and a scheduler are killed and restarted; a runner is revoked
(`DELETE /api/runners/<id>`) so its jobs go to the others, and a newly paired one takes
its place.

At the end the record is checked (`soak_record.py`): every job terminal and succeeded;
exactly one result and one `succeeded` attempt per succeeded job, the result coming from
that attempt; never two executing attempts; every attempt cut off by the chaos ended
`expired` or `superseded` with no result from it, or was resumed by its own runner;
exactly one result per case of every run; no job ended `no_runner`; no runner saw a result
refused for a transient reason; and, from the harness's own count, every succeeded case ran
and none ran more often than its job was leased. It prints the requeues (from the attempt
ledger), the executions, the calls the fence refused (each replica's
`everdict_fenced_calls_total`), jobs/s, and exits 1 on any violation.

    python bench/soak.py [--jobs 3000] [--runners 20] [--duration S] [--seed N]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/x python bench/soak.py

Leases last 10 s here (`--lease-ttl`): twenty runners heartbeating every TTL/3 on a
2-core machine cannot keep 3 s leases alive, and the soak would measure thrashing rather
than faults. It runs on a scratch PostgreSQL database of its own (created, migrated,
dropped after; `--keep` keeps it and the process logs). `tests/test_soak.py` runs a
shortened soak with this machinery in `make test`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from cluster import (  # noqa: E402
    DEFAULT_REDIS,
    Cluster,
    metric_sum,
    ok,
    redis_problem,
    scrape,
)
from soak_chaos import Chaos  # noqa: E402 (bench/ is on the path: run from there)
from soak_record import (  # noqa: E402
    execution_check,
    record_check,
    refusal_check,
)
from soak_report import Report, SoakConfig  # noqa: E402

SLUG = "soak"
HARNESS = "sleepy-echo"
# Twenty runners heartbeat every TTL/3: with a 3 s TTL on a 2-core machine the calls queue
# up past the TTL, leases expire under their holders and the soak thrashes (see --lease-ttl).
FULL_SOAK_TTL_S = 10
TERMINAL_RUN = {"succeeded", "failed", "canceled"}
FENCED_METRIC = "everdict_fenced_calls_total"

# The harness counts its own executions (one line per start, appended atomically), sleeps as
# long as its case says, and echoes the case's text.
HARNESS_SOURCE = """\
import os, sys, time
text, ms, executions = sys.argv[1], float(sys.argv[2]), sys.argv[3]
fd = os.open(executions, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, (text + "\\n").encode())
os.close(fd)
time.sleep(ms / 1000)
print(text)
"""
EXECUTIONS_FILE = "executions.txt"


# ------------------------------------------------------------------------ seeding


def seed_owner(username: str = "soak") -> tuple[Any, str]:
    """The member who owns every runner and run, and their API key."""
    from django.contrib.auth import get_user_model

    from accounts.services import api_key_create

    user = get_user_model().objects.create_user(username, password=None)
    return user, api_key_create(user=user, name="soak").key


class Soak(Chaos):
    """One soak: start the cluster, dispatch, strike, wait, check the record."""

    def __init__(self, config: SoakConfig, workdir: Path) -> None:
        self.config = config
        self.workdir = workdir
        self.rng = random.Random(config.seed)
        self.report = Report(config=config)
        self.cluster: Cluster | None = None
        self.key = ""
        self.scrapes: dict[tuple[int, int], str] = {}
        self._done = threading.Event()
        self._plan_done = threading.Event()
        if config.plan is None:
            self._plan_done.set()
        self._replacements = 0

    # ---- the whole soak

    def run(self) -> Report:
        config, report = self.config, self.report
        report.started = time.time()
        began = time.monotonic()
        _, self.key = seed_owner()
        env: dict[str, Any] = {
            "EVERDICT_LEASE_TTL_S": config.lease_ttl_s,
            # Presence written every second, so that a short idle timeout is legal.
            "EVERDICT_PRESENCE_WRITE_S": 1,
            "EVERDICT_QUEUE_IDLE_TIMEOUT_S": config.idle_timeout_s,
            "EVERDICT_MAX_ATTEMPTS": config.max_attempts,
            "DEBUG": "0",
            "SECRET_KEY": "everdict-soak-secret-key-shared-by-every-replica",
            "LOG_LEVEL": "WARNING",
        }
        if config.redis_url:
            env["REDIS_URL"] = config.redis_url
        with Cluster(
            self.workdir, replicas=config.replicas, schedulers=config.schedulers, env=env
        ) as cluster:
            self.cluster = cluster
            self._seed_suites()
            self._start_runners()
            self._dispatch()
            chaos = threading.Thread(target=self._chaos, name="chaos", daemon=True)
            chaos.start()
            try:
                self._watch()
            finally:
                self._done.set()
                chaos.join(config.sleep_s + 60)
            time.sleep(1.0)  # late calls of a just-resumed runner reach the fence
            self._scrape_all()
        report.elapsed_s = time.monotonic() - began
        self._check_record()
        return report

    def _say(self, message: str) -> None:
        if self.config.verbose:
            print(f"[{time.time() - self.report.started:7.1f}s] {message}", flush=True)

    def _api(self, method: str, path: str, body: Any = None, replica: int = 0) -> Any:
        assert self.cluster is not None
        return ok(self.cluster.replicas[replica].url, method, path, self.key, body)

    def _seed_suites(self) -> None:
        """A workspace, the harness and one dataset per run, through the REST API."""
        config = self.config
        self._api("POST", "/api/workspaces", {"slug": SLUG, "name": "Soak"})
        script = self.workdir / "sleepy_echo.py"
        script.write_text(HARNESS_SOURCE)
        spec = {
            # -S -I: the stdlib is all it needs, and a case should not pay for site-packages.
            "command": [
                sys.executable,
                "-S",
                "-I",
                str(script),
                "{input.text}",
                "{input.ms}",
                str(self.workdir / EXECUTIONS_FILE),
            ],
            "timeout_s": 60,
            "capabilities": ["python"],
            "output": "text",
            "grader": {"type": "exact"},
        }
        self._api("POST", f"/api/workspaces/{SLUG}/harnesses", {"name": HARNESS, "spec": spec})
        runs = max(2, round(config.jobs / config.jobs_per_run))
        sizes = [config.jobs // runs + (1 if i < config.jobs % runs else 0) for i in range(runs)]
        self.sizes = [s for s in sizes if s]
        for i, size in enumerate(self.sizes):
            cases = [
                {
                    "key": f"c{j}",
                    "input": {"text": f"r{i}-c{j}", "ms": self._case_ms()},
                    "expected": f"r{i}-c{j}",
                }
                for j in range(size)
            ]
            self._api("POST", f"/api/workspaces/{SLUG}/datasets", {"name": f"d{i}", "cases": cases})

    def _case_ms(self) -> int:
        long = self.rng.random() < self.config.long_share
        return self.rng.randint(*(self.config.long_ms if long else self.config.sleep_ms))

    def _pair(self, label: str) -> tuple[int, str]:
        paired = self._api("POST", "/api/runners", {"label": label, "capabilities": ["python"]})
        return int(paired["id"]), str(paired["token"])

    def _start_runners(self) -> None:
        assert self.cluster is not None
        low, high = self.config.max_concurrent
        for i in range(self.config.runners):
            runner_id, token = self._pair(f"runner-{i}")
            slots = self.rng.randint(low, high)
            self.report.slots += slots
            replica = self.cluster.replicas[i % len(self.cluster.replicas)]
            self.cluster.add_runner(
                runner_id=runner_id,
                token=token,
                label=f"runner-{i}",
                server=replica.url,
                max_concurrent=slots,
                wait_ms=self.config.wait_ms,
            )
        self._wait_connected()

    def _wait_connected(self, timeout_s: float = 180) -> None:
        """Every runner connected before the first case goes out: on a slow machine, starting
        20 runner processes on two cores takes longer than the idle timeout, and a job queued
        that long before any runner was seen is rightly ended `no_runner`."""
        assert self.cluster is not None
        deadline = time.monotonic() + timeout_s
        for runner in self.cluster.runners:
            proc = runner.proc
            assert proc is not None
            while "connected to" not in proc.log.read_text(errors="replace"):
                if proc.popen.poll() is not None or time.monotonic() > deadline:
                    tail = proc.log.read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"{runner.label} did not connect:\n{tail}")
                time.sleep(0.05)

    def _dispatch(self) -> None:
        assert self.cluster is not None
        low, high = self.config.run_concurrency
        replicas = len(self.cluster.replicas)
        for i in range(len(self.sizes)):
            run = self._api(
                "POST",
                f"/api/workspaces/{SLUG}/runs",
                {
                    "harness": HARNESS,
                    "dataset": f"d{i}",
                    "runtime": "self:any",
                    "concurrency": self.rng.randint(low, high),
                },
                replica=i % replicas,
            )
            self.report.run_ids.append(int(run["id"]))
        self._say(f"dispatched {sum(self.sizes)} jobs in {len(self.sizes)} runs")

    # ---- watching

    def _watch(self) -> None:
        from django.db import close_old_connections

        from scorecards.models import Run

        assert self.cluster is not None
        deadline = time.monotonic() + self.config.timeout_s
        next_scrape = next_say = 0.0
        while True:
            close_old_connections()
            statuses = list(
                Run.objects.filter(pk__in=self.report.run_ids).values_list("status", flat=True)
            )
            # A fixed plan is played to its end even if the jobs finish first.
            if all(s in TERMINAL_RUN for s in statuses) and self._plan_done.is_set():
                return
            if time.monotonic() > deadline:
                self.report.violations.append(
                    f"timed out after {self.config.timeout_s:.0f}s with runs still open"
                )
                return
            for runner, code in self.cluster.exited_runners():
                self.report.violations.append(
                    f"runner {runner.runner_id} ({runner.label}) exited on its own with {code}:"
                    f" see {runner.proc.log if runner.proc else '?'}"
                )
                self.cluster.start_runner(runner)
            now = time.monotonic()
            if now >= next_scrape:
                self._scrape_all()
                next_scrape = now + 2.0
            if self.config.verbose and now >= next_say:
                self._say(self._progress())
                next_say = now + 10.0
            time.sleep(0.5)

    def _progress(self) -> str:
        from django.db.models import Count

        from runners.models import RunnerJob

        rows = (
            RunnerJob.objects.filter(run_id__in=self.report.run_ids)
            .values("status")
            .annotate(n=Count("pk"))
            .order_by()
        )
        return ", ".join(f"{r['n']} {r['status']}" for r in rows)

    def _scrape_all(self) -> None:
        assert self.cluster is not None
        for replica in self.cluster.replicas:
            self._scrape(replica.index)

    def _scrape(self, index: int) -> None:
        assert self.cluster is not None
        replica = self.cluster.replicas[index]
        text = scrape(replica.url)
        if text is not None:
            self.scrapes[(index, replica.incarnation)] = text

    # ---- the record

    def _check_record(self) -> None:
        violations, figures = record_check(
            run_ids=self.report.run_ids,
            events=self.report.events,
            lease_ttl_s=self.config.lease_ttl_s,
        )
        self.report.violations.extend(violations)
        ran, ran_figures = execution_check(
            executions=self.workdir / EXECUTIONS_FILE, run_ids=self.report.run_ids
        )
        refused, refused_figures = refusal_check(self._runner_logs())
        self.report.violations.extend(ran + refused)
        figures.update(ran_figures | refused_figures)
        fenced: dict[str, float] = {}
        for text in self.scrapes.values():
            for labels, value in metric_sum(text, FENCED_METRIC).items():
                found = dict(_label_pairs(labels))
                name = f"{found.get('call', '?')} ({found.get('reason', '?')})"
                fenced[name] = fenced.get(name, 0.0) + value
        figures["fenced_by_call"] = fenced
        figures["fenced"] = sum(fenced.values())
        figures["fenced_stale"] = sum(v for k, v in fenced.items() if k.endswith("(stale)"))
        self.report.figures.update(figures)

    def _runner_logs(self) -> list[Path]:
        assert self.cluster is not None
        # Each start of a runner logs to a file of its own (`<label>-<incarnation>.log`).
        logs = [
            self.workdir / f"{runner.label}-{incarnation}.log"
            for runner in self.cluster.runners
            for incarnation in range(1, runner.incarnation + 1)
        ]
        return [log for log in logs if log.exists()]


def _label_pairs(labels: str) -> list[tuple[str, str]]:
    pairs = []
    for part in labels.split('",'):
        name, _, value = part.partition("=")
        pairs.append((name.strip(), value.strip().strip('"')))
    return pairs


# --------------------------------------------------------------------------- script


def main() -> None:
    from databases import add_database_arguments, scratch_database
    from servers import raise_open_files

    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=textwrap.dedent(
            """\
            Chaos goes on while jobs remain (or for --duration seconds after dispatch, if
            shorter); the soak then waits for every run to end and checks the record."""
        ),
    )
    parser.add_argument("--jobs", type=int, default=3000, help="jobs in all (default 3000)")
    parser.add_argument("--runners", type=int, default=20, help="runner processes (default 20)")
    parser.add_argument(
        "--duration", type=float, default=None, help="cap the chaos to S seconds after dispatch"
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument(
        "--lease-ttl",
        type=int,
        default=FULL_SOAK_TTL_S,
        help="EVERDICT_LEASE_TTL_S of the servers (default %(default)s); a paused runner "
        "sleeps twice this long",
    )
    parser.add_argument(
        "--redis",
        default=f"{DEFAULT_REDIS}/7",
        help="REDIS_URL of the replicas (default %(default)s; 'none' to run without)",
    )
    parser.add_argument("--timeout", type=float, default=1800, help="give up after S seconds")
    parser.add_argument("--quiet", action="store_true", help="print only the summary")
    add_database_arguments(parser)
    parser.set_defaults(db_name="everdict_soak")
    args = parser.parse_args()
    if args.sqlite:
        parser.error("the soak needs PostgreSQL: several replicas share the queue through it")
    redis_url = None if args.redis.lower() == "none" else args.redis
    if redis_url and (problem := redis_problem(redis_url)):
        parser.error(f"{problem} (pass --redis none to run the replicas without it)")
    config = SoakConfig(
        jobs=args.jobs,
        runners=args.runners,
        seed=args.seed,
        duration_s=args.duration,
        lease_ttl_s=args.lease_ttl,
        redis_url=redis_url,
        timeout_s=args.timeout,
        verbose=not args.quiet,
    )
    raise_open_files(8192)
    with scratch_database(args) as scratch:
        report = Soak(config, scratch.workdir).run()
        print()
        print(report.text())
        if args.summary_json:
            Path(args.summary_json).write_text(
                json.dumps(
                    {
                        "figures": report.figures,
                        "events": [e.__dict__ for e in report.events],
                        "violations": report.violations,
                        "elapsed_s": report.elapsed_s,
                    },
                    indent=2,
                    default=str,
                )
            )
        if not report.ok:
            # Leaving the block by an exception keeps the process logs for a look.
            print(f"\nprocess logs: {scratch.workdir}", file=sys.stderr)
            raise SystemExit(1)


if __name__ == "__main__":
    main()
