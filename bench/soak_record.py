"""The soak's record, checked in SQL and in what the harness itself wrote.

Every rule lists what breaks it; each must come back empty. Besides the queue's own ledger
(every job terminal and succeeded, one result and one succeeded attempt per job, fenced-off
attempts leaving no result) the harness's own count of its executions is read back: a case
executed more often than its job was leased ran twice under one lease. No job may end
`no_runner` (the soak keeps capable runners active throughout), and no runner may have seen
a result refused for the server's own passing trouble.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# A lease call that passed authentication just before a revocation may still claim a
# moment later; a claim later than this after the revocation is a lease to a revoked runner.
GRACE_S = 1.5
# What a runner prints when the server refused a result, and the words of the server's own
# passing trouble (database unavailable or locked, a deadlock): such a refusal must never
# happen — the server answers those with a retryable error, and the runner sends again.
REFUSED_LINE = re.compile(r"✗ (?:result|report) refused: (?P<reason>.*)")
TRANSIENT_WORDS = re.compile(
    r"unavailable|database is locked|deadlock|could not connect|connection|timed out", re.I
)


@dataclass
class ChaosEvent:
    kind: str
    at: float  # wall clock, seconds
    target: str
    runner_id: int | None = None
    until: float | None = None  # a paused runner's resume
    cut: int = 0  # attempts the event cut off (filled by the record check)
    resumed: int = 0  # attempts its runner took back after it (filled by the record check)
    note: str = ""


def _stamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


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
    no_runner = _rows(
        f"""SELECT j.id, j.reason FROM {job} j
            WHERE j.run_id = ANY(%(runs)s) AND j.reason LIKE 'no_runner%%'""",
        params,
    )
    if no_runner:
        violations.append(
            f"jobs ended no_runner while capable runners were active: {len(no_runner)} — "
            f"e.g. {no_runner[:5]}"
        )
    violations.extend(_fence_violations(events, lease_ttl_s, attempt, result))
    return violations, _figures(params, job, attempt)


def execution_check(*, executions: Path, run_ids: list[int]) -> tuple[list[str], dict[str, Any]]:
    """Read back the harness's own count of its executions (one line `r<run>-c<case>` per
    start): every succeeded case ran at least once, and never more often than its job was
    leased (a resumed lease runs nothing again)."""
    from django.db.models import Count

    from runners.models import RunnerJob

    counted = Counter(executions.read_text().split()) if executions.exists() else Counter()
    # Every lease opens an attempt: the attempts of a job are the times it was leased.
    leased = {
        (run_id, key): (status, attempts)
        for run_id, key, status, attempts in RunnerJob.objects.filter(run_id__in=run_ids)
        .annotate(leases=Count("attempt_set"))
        .values_list("run_id", "case_key", "status", "leases")
    }
    runs = dict(enumerate(run_ids))
    ran: Counter[tuple[int, str]] = Counter()
    for text, n in counted.items():
        run_index, _, key = text.partition("-")
        ran[(runs[int(run_index[1:])], key)] += n
    never = [k for k, (status, _) in leased.items() if status == "succeeded" and not ran[k]]
    twice = [(k, ran[k], attempts) for k, (_, attempts) in leased.items() if ran[k] > attempts]
    violations = []
    if never:
        violations.append(f"succeeded cases the harness never ran: {len(never)} — {never[:5]}")
    if twice:
        violations.append(
            f"cases the harness ran more often than their job was leased: {len(twice)} — "
            f"(case, runs, leases) {twice[:5]}"
        )
    figures = {
        "executions": sum(ran.values()),
        "executed_cases": len(ran),
        "rerun_cases": sum(1 for n in ran.values() if n > 1),
    }
    return violations, figures


def refusal_check(runner_logs: list[Path]) -> tuple[list[str], dict[str, Any]]:
    """No runner saw a result or report refused for the server's own passing trouble."""
    refused: Counter[str] = Counter()
    transient = []
    for log in runner_logs:
        for line in log.read_text(errors="replace").splitlines():
            match = REFUSED_LINE.search(line)
            if match is None:
                continue
            reason = match.group("reason")
            refused[reason.split(":")[0][:60]] += 1
            if TRANSIENT_WORDS.search(reason):
                transient.append(f"{log.name}: {line.strip()}")
    violations = []
    if transient:
        violations.append(
            f"results refused for a transient reason: {len(transient)} — {transient[:3]}"
        )
    return violations, {"refused_by_reason": dict(refused)}


def _fence_violations(
    events: list[ChaosEvent], lease_ttl_s: int, attempt: str, result: str
) -> list[str]:
    """The attempts a kill, pause, sleep or revoke cut off must end expired or superseded,
    and no result may come from them: whatever the runner sent for them later was refused —
    unless the runner itself took the attempt back (resumed it: after a pause or a sleep its
    case had kept running, after a kill its result waited in the spool) before anyone else
    leased the job. A revoked runner takes nothing back."""
    violations = []
    for event in events:
        if event.runner_id is None:
            continue
        stopped = event.at
        may_resume = event.kind != "revoke_runner"
        if event.kind in ("pause_runner", "sleep_runner"):
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
        # The attempts the runner held when it was struck, each with whether it ended late
        # and whether the job was leased again after it.
        held = _rows(
            f"""SELECT a.id, a.job_id, a.status,
                       a.ended_at IS NULL OR a.ended_at > %(late_after)s, a.resumes,
                       EXISTS (SELECT 1 FROM {attempt} b
                               WHERE b.job_id = a.job_id AND b.started_at > a.started_at)
                FROM {attempt} a
                WHERE a.runner_id = %(runner)s AND a.started_at < %(cut_before)s
                  AND (a.ended_at IS NULL OR a.ended_at > %(stopped)s)""",
            params,
        )
        cut = [row for row in held if row[2] in ("expired", "superseded")]
        event.cut = len(cut)
        # Taken back by its runner: resumed after its lease was expired, or — its lease
        # lapsed but not yet expired by a scheduler the load delayed, or kept alive by a
        # heartbeat the server answered late — still its holder's when the late call came,
        # nobody having leased the job since. Either way no one else's work was overwritten.
        resumed = [
            row for row in held if row[3] and row[2] == "succeeded" and (row[4] > 0 or not row[5])
        ]
        event.resumed = len(resumed) if may_resume else 0
        wrong = [
            row[:3]
            for row in held
            if row[3]
            and row[2] not in ("expired", "superseded")
            and not (may_resume and row in resumed)
        ]
        if wrong:
            violations.append(
                f"{event.kind} of runner {event.runner_id} at {_stamp(stopped):%H:%M:%S.%f}: "
                f"attempts it held were settled by a late call instead of ending "
                f"expired/superseded (or resumed by it): {wrong[:5]}"
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
