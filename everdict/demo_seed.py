"""What `make demo` seeds, from one table: the `demo` workspace (user demo/demo), and each
harness and dataset in it — a new version only of one that changed, so a second start reuses
what the first one seeded.

- the demo assistant (`demo-echo`: a small local Python script) over ten questions, three of
  which fail by design, and the same questions graded by a judge (`demo-judged`);
- a browser driven headless (`demo-browser`, run where chromium is);
- two service harnesses over three pages (`demo-web`, `demo-web-docker`);
- a verified harness on a project with a bug (`demo-verified`): its scripted agent fixes the
  bug in one case and edits the test in the other (a pass and a tampered fail).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from everdict.demo_browser import BROWSER_CASES, BROWSER_DATASET, BROWSER_HARNESS, browser_spec
from everdict.demo_judge import JUDGED_ALLOWS, JUDGED_HARNESS, judged_harness_spec
from everdict.demo_verify import VERIFY_CASES, VERIFY_DATASET, VERIFY_HARNESS, verified_spec
from everdict.demo_web import (
    WEB_CASES,
    WEB_DATASET,
    WEB_DOCKER_HARNESS,
    WEB_HARNESS,
    web_docker_spec,
    web_spec,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User

USERNAME = PASSWORD = "demo"
WORKSPACE = "demo"
HARNESS = "demo-echo"
DATASET = "demo-questions"

CASES: list[dict[str, Any]] = [
    {"key": "add", "input": {"task": "add", "a": 17, "b": 25, "prompt": "What is 17 + 25?"},
     "expected": "42"},
    {"key": "reverse", "input": {"task": "reverse", "text": "stressed",
     "prompt": "Reverse the word 'stressed'."}, "expected": "desserts"},
    {"key": "upper", "input": {"task": "upper", "text": "everdict",
     "prompt": "Shout 'everdict'."}, "expected": "EVERDICT"},
    {"key": "capital-france", "input": {"task": "capital", "country": "France",
     "prompt": "What is the capital of France?"}, "expected": "Paris"},
    {"key": "capital-australia", "input": {"task": "capital", "country": "Australia",
     "prompt": "What is the capital of Australia?"}, "expected": "Canberra"},
    {"key": "vowels", "input": {"task": "vowels", "text": "evaluation",
     "prompt": "How many vowels are in 'evaluation'?"}, "expected": "6"},
    {"key": "sort", "input": {"task": "sort", "text": "pear apple fig",
     "prompt": "Sort: pear apple fig."}, "expected": "apple fig pear"},
    {"key": "translate", "input": {"task": "translate", "text": "thank you",
     "prompt": "'thank you' in French?"}, "expected": "merci"},
    {"key": "power", "input": {"task": "power", "base": 2, "exponent": 10,
     "prompt": "What is 2 to the power of 10?"}, "expected": "1024"},
    {"key": "trivia", "input": {"task": "trivia",
     "prompt": "In which year did the first Moon landing happen?"}, "expected": "1969"},
]  # fmt: skip


def harness_spec() -> dict[str, Any]:
    """Run the demo harness with this interpreter: no PATH lookup, no shell."""
    script = Path(__file__).resolve().parent / "demo_harness.py"
    return {
        "command": [sys.executable, str(script)],
        "env": {"PYTHONUNBUFFERED": "1"},
        "timeout_s": 60,
        "capabilities": ["python"],
        "output": "json",
        "grader": {"type": "contains", "field": "result"},
    }


@dataclass(frozen=True)
class DemoHarness:
    name: str
    # Made when seeded: a spec names this interpreter and the scripts beside this file.
    spec: Callable[[], dict[str, Any]]


@dataclass(frozen=True)
class DemoDataset:
    name: str
    cases: list[dict[str, Any]]


JUDGED = DemoHarness(JUDGED_HARNESS, judged_harness_spec)
HARNESSES = (
    DemoHarness(HARNESS, harness_spec),
    DemoHarness(BROWSER_HARNESS, browser_spec),
    JUDGED,
    DemoHarness(WEB_HARNESS, web_spec),
    DemoHarness(WEB_DOCKER_HARNESS, web_docker_spec),
    DemoHarness(VERIFY_HARNESS, verified_spec),
)
# What the demo's runner may run: the table's harnesses, and the judged one's judge.
ALLOWED = tuple(dict.fromkeys([*(harness.name for harness in HARNESSES), *JUDGED_ALLOWS]))
DATASETS = (
    DemoDataset(DATASET, CASES),
    DemoDataset(BROWSER_DATASET, BROWSER_CASES),
    DemoDataset(WEB_DATASET, WEB_CASES),
    DemoDataset(VERIFY_DATASET, VERIFY_CASES),
)


def demo_user() -> User:
    from django.contrib.auth import get_user_model

    user, _ = get_user_model().objects.get_or_create(username=USERNAME)
    user.set_password(PASSWORD)  # a second start still logs in with demo/demo
    user.save()
    return user


def demo_seed(user: User) -> None:
    """The workspace and every harness and dataset of the table, each a new version only when
    it changed."""
    from scorecards.models import Workspace
    from scorecards.services import workspace_create

    if not Workspace.objects.filter(slug=WORKSPACE).exists():
        workspace_create(user=user, slug=WORKSPACE, name="Demo")
    for harness in HARNESSES:
        harness_seed(user, WORKSPACE, harness)
    for dataset in DATASETS:
        dataset_seed(user, WORKSPACE, dataset)


def harness_seed(user: Any, workspace: str, harness: DemoHarness) -> None:
    """The harness, or a new version of it when its spec changed."""
    from runnercli.protocol import HarnessSpec
    from scorecards.models import HarnessVersion
    from scorecards.services import harness_create

    spec = HarnessSpec.model_validate(harness.spec()).model_dump(mode="json")
    latest = (
        HarnessVersion.objects.filter(workspace__slug=workspace, name=harness.name)
        .order_by("-version")
        .first()
    )
    if latest is None or latest.spec != spec:
        harness_create(user=user, workspace_slug=workspace, name=harness.name, spec=spec)


def dataset_seed(user: Any, workspace: str, dataset: DemoDataset) -> None:
    """The dataset, or a new version of it when its cases changed."""
    from scorecards.models import Case, DatasetVersion
    from scorecards.services import dataset_create

    latest = (
        DatasetVersion.objects.filter(workspace__slug=workspace, name=dataset.name)
        .order_by("-version")
        .first()
    )
    stored = (
        [
            {key: value for key, value in case.items() if value is not None}
            for case in Case.objects.filter(dataset=latest).values(
                "key", "input", "expected", "tests"
            )
        ]
        if latest
        else None
    )
    wanted = [{k: v for k, v in case.items() if v is not None} for case in dataset.cases]
    for case in wanted:
        # A case's tests are stored with both lists, the one it leaves out empty.
        if "tests" in case:
            case["tests"] = {"fail_to_pass": [], "pass_to_pass": [], **case["tests"]}
    if stored != wanted:
        dataset_create(user=user, workspace_slug=workspace, name=dataset.name, cases=dataset.cases)
