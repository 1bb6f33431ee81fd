"""The demo's judged harness: the demo assistant again, graded by a judge instead of a
string match — the judge a local deterministic script (`demo_judge_script.py`), so a new
user sees a judged run, its reasons and who judged it, without any login."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from django.contrib.auth.models import User

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


def seed_judged(user: User, workspace: str) -> None:
    """The judged harness, or a new version of it when it changed."""
    from runnercli.protocol import HarnessSpec
    from scorecards.models import HarnessVersion
    from scorecards.services import harness_create

    spec = HarnessSpec.model_validate(judged_harness_spec()).model_dump(mode="json")
    found = HarnessVersion.objects.filter(workspace__slug=workspace, name=JUDGED_HARNESS).first()
    if found is None or found.spec != spec:
        harness_create(user=user, workspace_slug=workspace, name=JUDGED_HARNESS, spec=spec)
