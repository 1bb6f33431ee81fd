"""The demo's judged harness: the demo assistant again, graded by a judge instead of a
string match — the judge a local deterministic script (`demo_judge_script.py`), so a new
user sees a judged run, its reasons and who judged it, without any login."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

JUDGED_HARNESS = "demo-judged"
# What a member allows for it: the harness, and its judge (allowed like a harness).
JUDGED_ALLOWS = (JUDGED_HARNESS, f"{JUDGED_HARNESS}.judge")
RUBRIC = "Does the assistant's answer say the same as the reference answer?"


def judged_harness_spec() -> dict[str, Any]:
    here = Path(__file__).resolve().parent
    return {
        "command": [sys.executable, str(here / "demo_harness.py")],
        "env": {"PYTHONUNBUFFERED": "1"},
        "timeout_s": 60,
        "capabilities": ["python"],
        "output": "json",
        "grader": {
            "type": "judge",
            "rubric": RUBRIC,
            "judge": {
                "command": [
                    sys.executable,
                    str(here / "demo_judge_script.py"),
                    "--model",
                    "demo-judge-1",
                ],
                "capabilities": ["python"],
                "timeout_s": 60,
            },
        },
    }


def judged_run(watch: Callable[..., Any], *, dataset: str, concurrency: int) -> None:
    """The demo's questions graded by its judge: verdicts with reasons and judged_by (`watch`
    starts a run on the demo's runner, says it, waits for it and summarises it)."""
    watch(
        harness=JUDGED_HARNESS,
        dataset=dataset,
        concurrency=concurrency,
        says=", graded by a judge on this machine: ",
    )
