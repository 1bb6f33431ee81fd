"""What `submit` was told, and the exit codes a CI job reads."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

API_KEY_ENV = "EVERDICT_API_KEY"
EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_ERROR = 2


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
    harness_version: int | None = None
    dataset_version: int | None = None
