"""What `submit` was told, and the exit codes a CI job reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runnercli.client.personal import API_KEY_ENV

EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_ERROR = 2
# The run's budget (`--max-cost-usd`) ended it: cases were skipped; nothing else failed.
EXIT_BUDGET = 3

# What fails the build against a baseline: the compare's overall verdict `worse` (B is worse
# beyond noise), or any case that regressed.
SIGNIFICANT_REGRESSION = "significant-regression"
ANY_REGRESSION = "any-regression"
FAIL_ON = (SIGNIFICANT_REGRESSION, ANY_REGRESSION)

__all__ = [
    "ANY_REGRESSION",
    "API_KEY_ENV",
    "EXIT_BUDGET",
    "EXIT_ERROR",
    "EXIT_FAILED",
    "EXIT_PASSED",
    "FAIL_ON",
    "SIGNIFICANT_REGRESSION",
    "Options",
]


@dataclass
class Options:
    server: str
    api_key: str
    workspace: str
    harness: str
    dataset: str
    runtime: str
    repeats: int
    concurrency: int
    baseline: str | None
    fail_under: float | None
    wait: bool
    here: bool
    poll_s: float
    metadata: dict[str, Any] = field(default_factory=dict)
    # With a baseline: significant-regression unless told otherwise.
    fail_on: tuple[str, ...] = (SIGNIFICANT_REGRESSION,)
    harness_version: int | None = None
    dataset_version: int | None = None
    # A harness file pushed first (`--harness-file`): the run uses the version it is.
    harness_file: Path | None = None
    # The run's budget in USD: once reached, the cases not started are skipped.
    max_cost_usd: float | None = None
