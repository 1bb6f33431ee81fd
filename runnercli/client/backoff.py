"""Jittered exponential backoff: how long the runner waits before it asks the server again."""

from __future__ import annotations

import random

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 10.0


class Backoff:
    """Jittered exponential backoff shared by the workers; any success resets it."""

    def __init__(self, base_s: float = BACKOFF_BASE_S, cap_s: float = BACKOFF_CAP_S) -> None:
        self.base_s = base_s
        self.cap_s = cap_s
        self.failures = 0

    def next_delay(self) -> float:
        ceiling = min(self.cap_s, self.base_s * 2**self.failures)
        self.failures = min(self.failures + 1, 16)
        return random.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        self.failures = 0
