"""Figures from samples: percentiles and latency lines."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def pct(values: Sequence[float], p: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return float(values[0])
    ordered = sorted(values)
    return float(statistics.quantiles(ordered, n=1000, method="inclusive")[int(p * 10) - 1])


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def latency_line(label: str, seconds: Sequence[float], width: int = 52) -> str:
    values = [s * 1000 for s in seconds]
    if not values:
        return f"{label:<{width}} (no samples)"
    return (
        f"{label:<{width}} p50 {pct(values, 50):8.2f} ms  p99 {pct(values, 99):8.2f} ms  "
        f"max {max(values):8.2f} ms  (n={len(values)})"
    )
