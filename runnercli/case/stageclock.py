"""The wall time each stage of the case pipeline takes, and the cases' time in their slots,
summed for the benchmarks."""

from __future__ import annotations

import atexit
import json
import os
from collections import defaultdict


class StageClock:
    """Wall time spent in each stage's hooks, summed over the cases, and the slot-seconds the
    cases of each run held (a case of two slots counts twice), for the benchmarks: on when
    `EVERDICT_STAGE_TIMES` names a file, written there as JSON when the runner exits
    (`{"cases": n, "seconds": {stage: s}, "slot_seconds": {run id: s}}`). Off, a case pays
    one attribute read."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.on = bool(path)
        self.cases = 0
        self.seconds: dict[str, float] = defaultdict(float)
        self.slot_seconds: dict[int, float] = defaultdict(float)
        if self.on:
            atexit.register(self.write)

    def add(self, stage: str, seconds: float) -> None:
        self.seconds[stage] += seconds

    def held(self, run_id: int, slot_seconds: float) -> None:
        """A case of the run is over: the slot-seconds it held."""
        self.slot_seconds[run_id] += slot_seconds

    def write(self) -> None:
        with open(self.path, "w", encoding="utf-8") as out:
            json.dump(
                {
                    "cases": self.cases,
                    "seconds": dict(self.seconds),
                    "slot_seconds": dict(self.slot_seconds),
                },
                out,
            )


stage_clock = StageClock(os.environ.get("EVERDICT_STAGE_TIMES", ""))
