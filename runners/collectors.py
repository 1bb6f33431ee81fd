"""The gauges read when /metrics is scraped: queue depth and runners online from the
database, so every replica reports the same shared truth for them; parked long-polls (and
those of them waiting for a wake-up) and the connection pool of this process."""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.db import connection
from django.db.models import Count
from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from runners.models import JobStatus, Runner, RunnerJob
from runners.wakeup import fs_hub, hub


class _QueueCollector(Collector):
    def describe(self) -> Iterable[Metric]:
        # Registration must not query the database (it may not exist yet).
        return []

    def collect(self) -> Iterable[Metric]:
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
        yield GaugeMetricFamily(
            "everdict_parked_fs_polls",
            "poll_case_fs_requests calls parked in this process.",
            value=fs_hub.parked(),
        )
        yield GaugeMetricFamily(
            "everdict_polls_waiting",
            "Long-polls of this process (lease_job, poll_case_fs_requests) whose look found"
            " nothing, waiting for a wake-up or their deadline.",
            value=hub.waiting_now() + fs_hub.waiting_now(),
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


_registered = False


def register() -> None:
    """Register the collectors with the process's registry, once (`RunnersConfig.ready`)."""
    global _registered
    if not _registered:
        REGISTRY.register(_QueueCollector())
        REGISTRY.register(_PoolCollector())
        _registered = True
