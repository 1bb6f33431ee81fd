"""The demo's browser part: a harness driving Debian's chromium headless, and its cases.

`make demo` seeds them always and runs them when this machine has chromium (the runner then
offers the capability `chromium`); without it, the run form greys the runner out: "needs
chromium".
"""

from __future__ import annotations

import shutil
import sys
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
