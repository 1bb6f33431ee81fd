"""Prometheus metrics of the queue: counters on the hot path, depth gauges at scrape time.

Counters are per process (each replica is scraped on its own); the queue depth and
runners online are read from the database when scraped, so every replica reports the
same shared truth for them.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest
from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from accounts.tokens import digest

LEASES = Counter("everdict_leases", "Jobs leased to runners.")
LEASE_CALLS = Counter("everdict_lease_calls", "lease_job calls answered.", ["outcome"])
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


class _QueueCollector(Collector):
    def describe(self) -> Iterable[Metric]:
        # Registration must not query the database (it may not exist yet).
        return []

    def collect(self) -> Iterable[Metric]:
        from runners.models import JobStatus, Runner, RunnerJob
        from runners.wakeup import hub

        depth = GaugeMetricFamily(
            "everdict_queue_jobs", "Jobs in the queue by state.", labels=["status"]
        )
        counts = dict.fromkeys(JobStatus.values, 0)
        rows = RunnerJob.objects.values("status").annotate(n=Count("pk")).order_by()
        counts.update({row["status"]: row["n"] for row in rows})
        for status, n in counts.items():
            depth.add_metric([status], n)
        yield depth
        yield GaugeMetricFamily(
            "everdict_runners_online",
            "Runners seen within the presence window.",
            value=Runner.objects.online().count(),
        )
        yield GaugeMetricFamily(
            "everdict_parked_long_polls",
            "lease_job calls parked in this process.",
            value=hub.parked(),
        )


# psycopg_pool's get_stats() keys: counters (kept since the pool opened) and gauges (now).
_POOL_COUNTERS = (
    ("connections_num", "connections_opened", "Connections the pool opened to the database."),
    ("requests_num", "requests", "Connections asked of the pool (about one per request)."),
    ("requests_queued", "requests_queued", "Asks that waited for a free connection."),
    ("requests_errors", "requests_errors", "Asks refused: timed out or too many waiting."),
    ("connections_lost", "connections_lost", "Connections found broken and dropped."),
)
_POOL_GAUGES = (
    ("pool_size", "size", "Connections the pool holds, lent or not."),
    ("pool_available", "available", "Connections idle in the pool."),
    ("pool_max", "max", "The most connections the pool may hold (EVERDICT_DB_POOL_MAX)."),
    ("requests_waiting", "requests_waiting", "Asks waiting for a connection now."),
)


class _PoolCollector(Collector):
    """This process's PostgreSQL connection pool, when pooling is on (nothing otherwise)."""

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        from django.db import connection

        if not settings.DATABASES["default"].get("OPTIONS", {}).get("pool"):
            return
        pool = getattr(connection, "pool", None)
        if pool is None:
            return
        stats = pool.get_stats()
        for key, name, text in _POOL_COUNTERS:
            yield CounterMetricFamily(f"everdict_db_pool_{name}", text, value=stats.get(key, 0))
        yield CounterMetricFamily(
            "everdict_db_pool_requests_wait_seconds",
            "Time asks spent waiting for a free connection.",
            value=stats.get("requests_wait_ms", 0) / 1000,
        )
        for key, name, text in _POOL_GAUGES:
            yield GaugeMetricFamily(f"everdict_db_pool_{name}", text, value=stats.get(key, 0))


_collector = _QueueCollector()
REGISTRY.register(_collector)
REGISTRY.register(_PoolCollector())


def _allowed(request: HttpRequest) -> bool:
    mode = settings.EVERDICT_METRICS
    if mode == "open":
        return True
    if mode == "loopback":
        if "X-Forwarded-For" in request.headers or "Forwarded" in request.headers:
            # Relayed by a proxy on this machine: the caller is whoever reached the proxy.
            return False
        try:
            return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
        except ValueError:
            return False
    header = request.headers.get("Authorization", "")
    return header.startswith("Bearer ") and hmac.compare_digest(
        digest(header[7:].strip()), digest(mode)
    )


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Serve /metrics to loopback callers, everyone, or a bearer of the configured token."""
    if not _allowed(request):
        return HttpResponse("metrics are not available to this caller\n", status=403)
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
