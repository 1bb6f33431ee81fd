"""Prometheus metrics of the queue: the counters and histograms on the hot path.

Counters are per process (each replica is scraped on its own). The gauges read at scrape
time (queue depth, runners online, parked polls, the connection pool) are collected by
`runners.collectors`, registered when the app is ready.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

LEASES = Counter("everdict_leases", "Jobs leased to runners.")
LEASE_CALLS = Counter("everdict_lease_calls", "lease_job calls answered.", ["outcome"])
FS_POLLS = Counter("everdict_fs_polls", "poll_case_fs_requests calls taken (file request polls).")
QUEUE_WAIT = Histogram(
    "everdict_job_queue_wait_seconds",
    "From a job becoming claimable to its lease (for an idle long-poller: the wake latency).",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300),
)
REQUEUES = Counter("everdict_requeues", "Jobs put back in the queue.", ["reason"])
FENCED = Counter(
    "everdict_fenced_calls", "Runner calls refused by the lease fence.", ["call", "reason"]
)
CLAIMS = Counter(
    "everdict_claims",
    "Claims for runners' polls: found a job (yes), found none (no), or not run because the"
    " last re-check found the owner with no queued job (skipped).",
    ["found"],
)
RUNNER_TOKEN_LOOKUPS = Counter(
    "everdict_runner_token_lookups",
    "Runner tokens looked up for one call (not answered from the process's kept principals).",
)
RECHECKS = Counter(
    "everdict_wake_rechecks", "Periodic re-checks of the owners with parked long-polls."
)
SETTLED = Counter("everdict_jobs_settled", "Jobs that reached a terminal state.", ["status"])
GRADINGS = Counter(
    "everdict_gradings_started", "Reported outputs handed to their grader, counted as it starts."
)
RESUMES = Counter(
    "everdict_resumes", "Lapsed leases taken back by their holder (a runner that slept)."
)
SHADOWS = Counter("everdict_shadow_results", "Refused late results kept on their attempt.")
RELEASES = Counter(
    "everdict_releases", "Leases handed back by their runner without spending an attempt."
)
SWEEP_FAILURES = Counter(
    "everdict_sweep_failures",
    "Scheduler steps that raised on a row; the row is set aside for a while.",
    ["step"],
)


def fenced(call: str, reason: str) -> None:
    kind = "stale" if reason.startswith("stale") else reason.split(":")[0][:40]
    FENCED.labels(call=call, reason=kind).inc()
