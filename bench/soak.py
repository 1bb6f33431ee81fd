"""Chaos soak: a production-shaped cluster loses no job and accepts no fenced-off result.

Two daphne replicas and two schedulers over one PostgreSQL (and one Redis), 20 runner CLI
processes with `--max-concurrent` 1-4, a few thousand jobs in several `self:any` runs of
concurrency 10-50, and a harness that is a small Python script sleeping a random 0-200 ms
and printing its input. While the jobs run, chaos strikes at random: a runner is
`kill -9`ed and started again with the same token; a runner is `SIGSTOP`ped past its lease
TTL and resumed (its late calls must be refused by the fence); a replica and a scheduler
are killed and restarted; a runner is revoked (`DELETE /api/runners/<id>`) so its jobs go
to the others, and a newly paired one takes its place.

At the end the record is checked in SQL: every job terminal and succeeded; exactly one
result and one `succeeded` attempt per succeeded job, the result coming from that attempt;
never two executing attempts; every attempt cut off by the chaos ended `expired` or
`superseded` with no result from it; exactly one result per case of every run. It prints
the requeues (from the attempt ledger), the calls the fence refused (each replica's
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
import signal
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.cluster import (  # noqa: E402 (the repository root is put on the path first)
    DEFAULT_REDIS,
    Cluster,
    RunnerProcess,
    metric_sum,
    ok,
    redis_problem,
    scrape,
)

KINDS = ("kill_runner", "pause_runner", "restart_replica", "restart_scheduler", "revoke_runner")
WEIGHTS = {
    "kill_runner": 4,
    "pause_runner": 2,
    "restart_replica": 2,
    "restart_scheduler": 2,
    "revoke_runner": 1,
}
SLUG = "soak"
HARNESS = "sleepy-echo"
# A lease call that passed authentication just before a revocation may still claim a
# moment later; a claim later than this after the revocation is a lease to a revoked runner.
GRACE_S = 1.5
# Twenty runners heartbeat every TTL/3: with a 3 s TTL on a 2-core machine the calls queue
# up past the TTL, leases expire under their holders and the soak thrashes (see --lease-ttl).
FULL_SOAK_TTL_S = 10
TERMINAL_RUN = {"succeeded", "failed", "canceled"}
FENCED_METRIC = "everdict_fenced_calls_total"

HARNESS_SOURCE = """\
import random, sys, time
time.sleep(random.uniform(float(sys.argv[2]), float(sys.argv[3])) / 1000)
print(sys.argv[1])
"""


@dataclass
class SoakConfig:
    jobs: int = 3000
    runners: int = 20
    replicas: int = 2
    schedulers: int = 2
    seed: int = 1
    # Chaos goes on while jobs remain, for at most this long after dispatch (None: no cap).
    duration_s: float | None = None
    max_concurrent: tuple[int, int] = (1, 4)
    run_concurrency: tuple[int, int] = (10, 50)
    jobs_per_run: int = 400
    sleep_ms: tuple[int, int] = (0, 200)
    lease_ttl_s: int = 3
    # Chaos may cut one job short several times; it must not run out of attempts.
    max_attempts: int = 20
    wait_ms: int = 10_000
    redis_url: str | None = f"{DEFAULT_REDIS}/7"
    # A fixed sequence of chaos events (tests); None: every kind once, then at random.
    plan: Sequence[str] | None = None
    chaos_gap_s: tuple[float, float] = (1.0, 4.0)
    timeout_s: float = 1800
    verbose: bool = False

    @property
    def pause_s(self) -> float:
        # Well past the TTL: the lease expires and is re-granted while the runner sleeps.
        return 2.0 * self.lease_ttl_s


@dataclass
class ChaosEvent:
    kind: str
    at: float  # wall clock, seconds
    target: str
    runner_id: int | None = None
    until: float | None = None  # a paused runner's resume
    cut: int = 0  # attempts the event cut off (filled by the record check)
    note: str = ""


@dataclass
class Report:
    config: SoakConfig
    run_ids: list[int] = field(default_factory=list)
    events: list[ChaosEvent] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    started: float = 0.0
    elapsed_s: float = 0.0
    slots: int = 0

    @property
    def ok(self) -> bool:
        return not self.violations

    def text(self) -> str:
        c, f = self.config, self.figures
        lines = [
            f"chaos soak — PostgreSQL, {c.replicas} replicas, {c.schedulers} schedulers, "
            f"{c.runners} runners ({self.slots} slots, --max-concurrent "
            f"{c.max_concurrent[0]}-{c.max_concurrent[1]}), lease TTL {c.lease_ttl_s}s, "
            f"seed {c.seed}",
            f"jobs          {f.get('jobs', 0)} in {len(self.run_ids)} runs: "
            f"{f.get('succeeded', 0)} succeeded, {f.get('failed', 0)} failed, "
            f"{f.get('open', 0)} open",
            f"throughput    {f.get('jobs_per_s', 0):.1f} jobs/s (first dispatch → last result "
            f"{f.get('busy_s', 0):.1f}s); soak wall time {self.elapsed_s:.1f}s",
            f"attempts      {f.get('attempts', 0)}: "
            + ", ".join(f"{n} {s}" for s, n in sorted(f.get("attempts_by_status", {}).items())),
            f"requeues      {f.get('requeues', 0)} (attempts beyond one per job)",
            f"fenced calls  {f.get('fenced', 0):.0f} refused by the lease fence, "
            f"{f.get('fenced_stale', 0):.0f} of them late calls of a superseded or expired "
            f"lease (a killed replica's counters as of its last scrape)"
            + _breakdown(f.get("fenced_by_call", {})),
            f"lease→result  p50 {f.get('attempt_p50_s', 0):.2f}s, p99 "
            f"{f.get('attempt_p99_s', 0):.2f}s per succeeded attempt",
            f"chaos         {len(self.events)} events: "
            + ", ".join(f"{k} x{n}" for k, n in Counter(e.kind for e in self.events).items()),
        ]
        for event in self.events:
            offset = event.at - self.started
            lines.append(f"  +{offset:6.1f}s {event.kind:<18} {event.target}{_note(event)}")
        if self.violations:
            lines.append(f"VIOLATIONS ({len(self.violations)}):")
            lines.extend(f"  ✗ {v}" for v in self.violations)
        else:
            lines.append(
                "record        OK: every job terminal and succeeded; one result and one "
                "succeeded attempt per job, the result from that attempt; never two executing "
                "attempts; every cut-off attempt expired/superseded with no result from it; "
                "one result per case"
            )
        return "\n".join(lines)


def _breakdown(counts: dict[str, float]) -> str:
    return "".join(f"\n                {k}: {v:.0f}" for k, v in sorted(counts.items()))


def _note(event: ChaosEvent) -> str:
    parts = []
    if event.runner_id is not None:
        parts.append(f"{event.cut} attempt(s) cut off, all expired/superseded")
    if event.note:
        parts.append(event.note)
    return (": " + "; ".join(parts)) if parts else ""


def _stamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


# ------------------------------------------------------------------------ seeding


def seed_owner(username: str = "soak") -> tuple[Any, str]:
    """The member who owns every runner and run, and their API key."""
    from django.contrib.auth import get_user_model

    from accounts.services import api_key_create

    user = get_user_model().objects.create_user(username, password=None)
    return user, api_key_create(user=user, name="soak").key


class Soak:
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
            "EVERDICT_QUEUE_IDLE_TIMEOUT_S": 24 * 3600,
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
                chaos.join(config.pause_s + 60)
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
        low, high = config.sleep_ms
        spec = {
            # -S -I: the stdlib is all it needs, and a case should not pay for site-packages.
            "command": [
                sys.executable,
                "-S",
                "-I",
                str(script),
                "{input.text}",
                str(low),
                str(high),
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
                {"key": f"c{j}", "input": {"text": f"r{i}-c{j}"}, "expected": f"r{i}-c{j}"}
                for j in range(size)
            ]
            self._api("POST", f"/api/workspaces/{SLUG}/datasets", {"name": f"d{i}", "cases": cases})

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

    # ---- chaos

    def _chaos(self) -> None:
        from django.db import connection

        config = self.config
        plan = list(config.plan) if config.plan is not None else self.rng.sample(KINDS, len(KINDS))
        started = time.monotonic()
        try:
            while not self._done.is_set():
                if config.plan is not None and not plan:
                    self._plan_done.set()
                    return
                if config.duration_s is not None and time.monotonic() - started > config.duration_s:
                    return
                if self._done.wait(self.rng.uniform(*config.chaos_gap_s)):
                    return
                kind = plan.pop(0) if plan else self._random_kind()
                getattr(self, f"_{kind}")()
        except Exception as exc:
            self.report.violations.append(f"the chaos itself failed: {exc!r}")
        finally:
            self._plan_done.set()
            connection.close()

    def _random_kind(self) -> str:
        kinds = list(WEIGHTS)
        return self.rng.choices(kinds, weights=[WEIGHTS[k] for k in kinds])[0]

    def _event(self, kind: str, target: str, **fields: Any) -> ChaosEvent:
        event = ChaosEvent(kind=kind, at=time.time(), target=target, **fields)
        self.report.events.append(event)
        self._say(f"{kind} {target}")
        return event

    def _pick_runner(self) -> RunnerProcess:
        """A running runner, one of those holding the most leases (the chaos cuts work short)."""
        from django.db.models import Count

        from runners.models import JobStatus, RunnerJob

        assert self.cluster is not None
        deadline = time.monotonic() + 10
        while True:
            live = [
                r
                for r in self.cluster.live_runners()
                if not r.down and r.proc is not None and r.proc.popen.poll() is None
            ]
            held = dict(
                RunnerJob.objects.filter(
                    status=JobStatus.LEASED, leased_by_id__in=[r.runner_id for r in live]
                )
                .values_list("leased_by_id")
                .annotate(n=Count("pk"))
                .order_by()
            )
            most = max((held.get(r.runner_id, 0) for r in live), default=0)
            if most or time.monotonic() > deadline or self._done.is_set():
                return self.rng.choice([r for r in live if held.get(r.runner_id, 0) == most])
            time.sleep(0.1)

    def _kill_runner(self) -> None:
        assert self.cluster is not None
        runner = self._pick_runner()
        self._event("kill_runner", f"runner {runner.runner_id}", runner_id=runner.runner_id)
        self.cluster.kill_runner(runner)
        time.sleep(self.rng.uniform(0.3, 1.5))
        self.cluster.start_runner(runner)  # the same token: the same runner comes back

    def _pause_runner(self) -> None:
        runner = self._pick_runner()
        assert runner.proc is not None
        event = self._event(
            "pause_runner", f"runner {runner.runner_id}", runner_id=runner.runner_id
        )
        runner.proc.signal_group(signal.SIGSTOP)
        time.sleep(self.config.pause_s)
        runner.proc.signal_group(signal.SIGCONT)
        event.until = time.time()
        event.note = f"stopped {event.until - event.at:.1f}s"

    def _restart_replica(self) -> None:
        assert self.cluster is not None
        index = self.rng.randrange(len(self.cluster.replicas))
        self._scrape(index)  # its counters die with it
        event = self._event("restart_replica", f"replica {index}")
        self.cluster.kill_replica(index)
        time.sleep(self.rng.uniform(0.2, 1.0))
        self.cluster.start_replica(index)
        event.note = f"down {time.time() - event.at:.1f}s"

    def _restart_scheduler(self) -> None:
        assert self.cluster is not None
        index = self.rng.randrange(len(self.cluster.schedulers))
        self._event("restart_scheduler", f"scheduler {index}")
        self.cluster.kill_scheduler(index)
        time.sleep(self.rng.uniform(0.2, 1.0))
        self.cluster.start_scheduler(index)

    def _revoke_runner(self) -> None:
        assert self.cluster is not None
        runner = self._pick_runner()
        runner.retired = True
        event = self._event(
            "revoke_runner", f"runner {runner.runner_id}", runner_id=runner.runner_id
        )
        self._api("DELETE", f"/api/runners/{runner.runner_id}")
        assert runner.proc is not None
        code = runner.proc.wait(self.config.wait_ms / 1000 + 15)
        if code != 3:
            self.report.violations.append(
                f"revoked runner {runner.runner_id} did not exit with 3 (asking to pair "
                f"again) but {code}: see {runner.proc.log}"
            )
            runner.proc.stop(signal.SIGKILL)
        event.note = f"its process exited with {code}"
        # A newly paired machine takes its place, on the same replica.
        self._replacements += 1
        label = f"{runner.label}-new{self._replacements}"
        runner_id, token = self._pair(label)
        self.cluster.add_runner(
            runner_id=runner_id,
            token=token,
            label=label,
            server=runner.server,
            max_concurrent=runner.max_concurrent,
            wait_ms=runner.wait_ms,
        )

    # ---- the record

    def _check_record(self) -> None:
        violations, figures = record_check(
            run_ids=self.report.run_ids,
            events=self.report.events,
            lease_ttl_s=self.config.lease_ttl_s,
        )
        self.report.violations.extend(violations)
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


def _label_pairs(labels: str) -> list[tuple[str, str]]:
    pairs = []
    for part in labels.split('",'):
        name, _, value = part.partition("=")
        pairs.append((name.strip(), value.strip().strip('"')))
    return pairs


def _rows(sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def record_check(
    *, run_ids: list[int], events: list[ChaosEvent], lease_ttl_s: int
) -> tuple[list[str], dict[str, Any]]:
    """Check the soak's record in SQL; return the violations and the figures."""
    from runners.models import JobAttempt, RunnerJob
    from scorecards.models import Case, CaseResult, Run

    job, attempt = RunnerJob._meta.db_table, JobAttempt._meta.db_table
    result, case, run = CaseResult._meta.db_table, Case._meta.db_table, Run._meta.db_table
    params: dict[str, Any] = {"runs": run_ids}
    # Each query lists what breaks one rule; every one of them must come back empty.
    rules = {
        "job not terminal": f"""
            SELECT j.id, j.status FROM {job} j
            WHERE j.run_id = ANY(%(runs)s)
              AND j.status NOT IN ('succeeded', 'failed', 'canceled')""",
        "job lost (ended without success)": f"""
            SELECT j.id, j.status, j.reason FROM {job} j
            WHERE j.run_id = ANY(%(runs)s) AND j.status IN ('failed', 'canceled')""",
        "run not succeeded": f"""
            SELECT r.id, r.status FROM {run} r
            WHERE r.id = ANY(%(runs)s) AND r.status <> 'succeeded'""",
        "succeeded job without exactly one result": f"""
            SELECT j.id, COUNT(res.id) FROM {job} j
            JOIN {run} r ON r.id = j.run_id
            JOIN {case} c ON c.dataset_id = r.dataset_id AND c.key = j.case_key
            LEFT JOIN {result} res ON res.run_id = j.run_id AND res.case_id = c.id
            WHERE j.run_id = ANY(%(runs)s) AND j.status = 'succeeded'
            GROUP BY j.id HAVING COUNT(res.id) <> 1""",
        "succeeded job without exactly one succeeded attempt": f"""
            SELECT j.id, COUNT(a.id) FROM {job} j
            LEFT JOIN {attempt} a ON a.job_id = j.id AND a.status = 'succeeded'
            WHERE j.run_id = ANY(%(runs)s) AND j.status = 'succeeded'
            GROUP BY j.id HAVING COUNT(a.id) <> 1""",
        "job with two succeeded attempts": f"""
            SELECT a.job_id, COUNT(*) FROM {attempt} a JOIN {job} j ON j.id = a.job_id
            WHERE j.run_id = ANY(%(runs)s) AND a.status = 'succeeded'
            GROUP BY a.job_id HAVING COUNT(*) > 1""",
        "job with two executing attempts": f"""
            SELECT a.job_id, COUNT(*) FROM {attempt} a JOIN {job} j ON j.id = a.job_id
            WHERE j.run_id = ANY(%(runs)s) AND a.status = 'executing'
            GROUP BY a.job_id HAVING COUNT(*) > 1""",
        "finished job with an attempt still executing": f"""
            SELECT a.job_id, a.id FROM {attempt} a JOIN {job} j ON j.id = a.job_id
            WHERE j.run_id = ANY(%(runs)s) AND a.status = 'executing'
              AND j.status IN ('succeeded', 'failed', 'canceled')""",
        "job naming an attempt that is not its latest": f"""
            SELECT j.id, j.lease_epoch, a.epoch FROM {job} j
            JOIN {attempt} a ON a.id = j.current_attempt_id
            WHERE j.run_id = ANY(%(runs)s)
              AND (a.job_id <> j.id OR a.epoch <> j.lease_epoch
                   OR a.epoch <> (SELECT MAX(x.epoch) FROM {attempt} x WHERE x.job_id = j.id))""",
        "result not from the job's succeeded attempt": f"""
            SELECT res.id, res.attempt_id, a.status FROM {result} res
            JOIN {case} c ON c.id = res.case_id
            JOIN {job} j ON j.run_id = res.run_id AND j.case_key = c.key
            LEFT JOIN {attempt} a ON a.id = res.attempt_id
            WHERE res.run_id = ANY(%(runs)s) AND j.status = 'succeeded'
              AND (a.id IS NULL OR a.job_id <> j.id OR a.status <> 'succeeded'
                   OR a.runner_id IS DISTINCT FROM res.runner_id)""",
        "case without exactly one result": f"""
            SELECT r.id, c.key, COUNT(res.id) FROM {run} r
            JOIN {case} c ON c.dataset_id = r.dataset_id
            LEFT JOIN {result} res ON res.run_id = r.id AND res.case_id = c.id
            WHERE r.id = ANY(%(runs)s)
            GROUP BY r.id, c.key HAVING COUNT(res.id) <> 1""",
    }
    violations = []
    for rule, sql in rules.items():
        found = _rows(sql, params)
        if found:
            violations.append(f"{rule}: {len(found)} — e.g. {found[:5]}")
    violations.extend(_fence_violations(events, lease_ttl_s, attempt, result))
    return violations, _figures(params, job, attempt)


def _fence_violations(
    events: list[ChaosEvent], lease_ttl_s: int, attempt: str, result: str
) -> list[str]:
    """The attempts a kill, pause or revoke cut off must end expired or superseded, and no
    result may come from them: whatever the runner sent for them later was refused."""
    violations = []
    for event in events:
        if event.runner_id is None:
            continue
        stopped = event.at
        if event.kind == "pause_runner":
            assert event.until is not None
            # Leases granted while it slept that could not have expired before it woke may
            # rightly be its own again: only those with a full TTL to spare are judged.
            cut_before = event.until - lease_ttl_s - 1.0
            # A call sent before the stop may still be settling while the runner sleeps
            # (an overloaded server answers late); only what it sent after waking is late.
            late_after = event.until
        else:
            cut_before = stopped
            # A dead or revoked runner sends nothing more; a call already in flight is
            # settled within a lease TTL or not at all.
            late_after = stopped + lease_ttl_s
        params = {
            "runner": event.runner_id,
            "cut_before": _stamp(cut_before),
            "stopped": _stamp(stopped),
            "late_after": _stamp(late_after),
            "after": _stamp(stopped + GRACE_S),
        }
        # The attempts the runner held when it was struck, each with whether it ended late.
        held = _rows(
            f"""SELECT a.id, a.job_id, a.status,
                       a.ended_at IS NULL OR a.ended_at > %(late_after)s
                FROM {attempt} a
                WHERE a.runner_id = %(runner)s AND a.started_at < %(cut_before)s
                  AND (a.ended_at IS NULL OR a.ended_at > %(stopped)s)""",
            params,
        )
        cut = [row for row in held if row[2] in ("expired", "superseded")]
        event.cut = len(cut)
        wrong = [row[:3] for row in held if row[3] and row[2] not in ("expired", "superseded")]
        if wrong:
            violations.append(
                f"{event.kind} of runner {event.runner_id} at {_stamp(stopped):%H:%M:%S.%f}: "
                f"attempts it held were settled by a late call instead of ending "
                f"expired/superseded: {wrong[:5]}"
            )
        ids = [row[0] for row in cut]
        if ids:
            from_cut = _rows(
                f"SELECT id, attempt_id FROM {result} WHERE attempt_id = ANY(%(ids)s)",
                {"ids": ids},
            )
            if from_cut:
                violations.append(
                    f"{event.kind} of runner {event.runner_id}: results recorded from "
                    f"cut-off attempts: {from_cut[:5]}"
                )
        if event.kind == "revoke_runner":
            late = _rows(
                f"""SELECT a.id, a.job_id, a.status FROM {attempt} a
                    WHERE a.runner_id = %(runner)s AND a.started_at > %(after)s""",
                params,
            )
            if late:
                violations.append(
                    f"revoked runner {event.runner_id} was leased jobs after its revocation: "
                    f"{late[:5]}"
                )
    return violations


def _figures(params: dict[str, Any], job: str, attempt: str) -> dict[str, Any]:
    jobs = dict(
        _rows(
            f"SELECT status, COUNT(*) FROM {job} WHERE run_id = ANY(%(runs)s) GROUP BY status",
            params,
        )
    )
    attempts = dict(
        _rows(
            f"""SELECT a.status, COUNT(*) FROM {attempt} a JOIN {job} j ON j.id = a.job_id
                WHERE j.run_id = ANY(%(runs)s) GROUP BY a.status""",
            params,
        )
    )
    first, last = _rows(
        f"""SELECT MIN(created_at), MAX(finished_at) FROM {job}
            WHERE run_id = ANY(%(runs)s)""",
        params,
    )[0]
    p50, p99 = _rows(
        f"""SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY d),
                   percentile_cont(0.99) WITHIN GROUP (ORDER BY d)
            FROM (SELECT EXTRACT(EPOCH FROM a.ended_at - a.started_at) AS d
                  FROM {attempt} a JOIN {job} j ON j.id = a.job_id
                  WHERE j.run_id = ANY(%(runs)s) AND a.status = 'succeeded') t""",
        params,
    )[0]
    total = sum(jobs.values())
    busy_s = (last - first).total_seconds() if first and last else 0.0
    return {
        "jobs": total,
        "succeeded": jobs.get("succeeded", 0),
        "failed": jobs.get("failed", 0) + jobs.get("canceled", 0),
        "open": sum(n for s, n in jobs.items() if s not in ("succeeded", "failed", "canceled")),
        "attempts": sum(attempts.values()),
        "attempts_by_status": attempts,
        "requeues": sum(attempts.values()) - total,
        "busy_s": busy_s,
        "jobs_per_s": total / busy_s if busy_s else 0.0,
        "attempt_p50_s": float(p50 or 0.0),
        "attempt_p99_s": float(p99 or 0.0),
    }


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
