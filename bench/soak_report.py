"""The soak's configuration and its report: what was asked, what happened, what broke."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cluster import DEFAULT_REDIS
from soak_record import ChaosEvent


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
    # Some cases are long (seconds, as an agent session is minutes): this share of them, this
    # long. Chaos strikes them mid-case, and a one-slot runner holds its queue behind them.
    long_share: float = 0.05
    long_ms: tuple[int, int] = (2_000, 6_000)
    lease_ttl_s: int = 3
    # Short enough that a queue waiting behind long cases, or a runner asleep, would reach
    # it if the timeout counted queue age: no job may end `no_runner` (runners stay active).
    idle_timeout_s: int = 20
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

    @property
    def sleep_s(self) -> float:
        # A laptop's sleep: the runner and its cases stop, past the lease and past the
        # runner's own sleep threshold, but within the idle timeout.
        return max(2.0 * self.lease_ttl_s, 12.0)


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
            f"executions    {f.get('executions', 0)} counted by the harness for "
            f"{f.get('executed_cases', 0)} cases; {f.get('rerun_cases', 0)} ran more than once "
            "(each rerun a lease the chaos cut off)",
            "refused       results/reports refused, by reason: "
            + (", ".join(f"{k} x{n}" for k, n in f.get("refused_by_reason", {}).items()) or "none"),
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
                "attempts; every cut-off attempt expired/superseded with no result from it, or "
                "resumed by its own runner; one result per case; no job ended no_runner; no "
                "result refused for a transient reason; no case run more often than leased"
            )
        return "\n".join(lines)


def _breakdown(counts: dict[str, float]) -> str:
    return "".join(f"\n                {k}: {v:.0f}" for k, v in sorted(counts.items()))


def _note(event: ChaosEvent) -> str:
    parts = []
    if event.runner_id is not None:
        parts.append(f"{event.cut} attempt(s) cut off, all expired/superseded")
        if event.resumed:
            parts.append(f"{event.resumed} resumed by the runner itself")
    if event.note:
        parts.append(event.note)
    return (": " + "; ".join(parts)) if parts else ""
