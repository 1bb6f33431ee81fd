"""The demo's browser part: a harness driving Debian's chromium headless, and its cases.

`make demo` seeds them always and runs them when this machine has chromium (the runner then
offers the capability `chromium`); without it, the run form greys the runner out: "needs
chromium".
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

BROWSER_HARNESS = "demo-browser"
BROWSER_DATASET = "demo-adder"
BROWSER_CASES: list[dict[str, Any]] = [
    {"key": "adder-17-25", "input": {"a": 17, "b": 25}, "expected": "42"},
    {"key": "adder-2-2", "input": {"a": 2, "b": 2}, "expected": "4"},
]


def browser_spec() -> dict[str, Any]:
    """The browser harness with this interpreter (and its playwright): no PATH lookup."""
    script = Path(__file__).resolve().parent / "demo_browser_harness.py"
    return {
        "command": [sys.executable, str(script)],
        "env": {"PYTHONUNBUFFERED": "1"},
        "timeout_s": 120,
        "capabilities": ["python", "chromium"],
        "output": "text",
        "grader": {"type": "contains"},
    }


def has_chromium() -> bool:
    """Whether this machine can run the browser harness (the runner says so by `chromium`)."""
    try:
        import playwright  # noqa: F401
    except ImportError:
        return False
    return any(shutil.which(name) for name in ("chromium", "chromium-browser"))


def browser_run(watch: Callable[..., Any], console: Any) -> None:
    """A run of the browser harness, watched live on its page, when chromium is here (`watch`
    starts a run on the demo's runner, says it, waits for it and summarises it)."""
    if not has_chromium():
        console.print(
            f"No chromium here: the {BROWSER_HARNESS} harness (a browser the run page watches) "
            "needs chromium and the playwright package; `apt-get install chromium` to see it."
        )
        return
    watch(
        harness=BROWSER_HARNESS,
        dataset=BROWSER_DATASET,
        says=" of chromium driven headless: watch it at ",
    )
