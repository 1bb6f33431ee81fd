"""The demo's verified harness: a small Python project with a bug, in a git checkout the demo
makes, and a scripted agent that fixes the bug in one case and edits the test to expect the
wrong value in the other. The verifier (pytest with a JUnit report) runs on the restored
tests: the summary shows a pass and a tampered fail."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

VERIFY_HARNESS = "demo-verified"
VERIFY_DATASET = "demo-calc"
REPO_NAME = "demo/calc"

FILES = {
    ".gitignore": "__pycache__/\nreport.xml\n",
    "calc.py": "def add(a, b):\n    return a - b\n",
    "pytest.ini": "[pytest]\npythonpath = .\n",
    "tests/test_calc.py": (
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n"
        "def test_zero():\n    assert add(0, 0) == 0\n"
    ),
}
# The agent: its case's input says what it does.
AGENT = """
import json, os
from pathlib import Path
case = json.loads(Path(os.environ["EVERDICT_CASE_FILE"]).read_text())
if case["input"]["agent"] == "fix":
    Path("calc.py").write_text(Path("calc.py").read_text().replace("a - b", "a + b"))
    print("fixed add in calc.py")
else:
    test = Path("tests/test_calc.py")
    test.write_text(test.read_text().replace("== 5", "== -1"))
    print("made the test expect what add returns")
"""
LISTED = {"fail_to_pass": ["tests/test_calc.py::test_add"]}
VERIFY_CASES: list[dict[str, Any]] = [
    {"key": "fix-the-bug", "input": {"agent": "fix"}, "tests": LISTED},
    {"key": "edit-the-test", "input": {"agent": "edit"}, "tests": LISTED},
]


def has_pytest() -> bool:
    return importlib.util.find_spec("pytest") is not None


def verified_spec() -> dict[str, Any]:
    return {
        "command": [sys.executable, "-c", AGENT],
        "timeout_s": 60,
        "capabilities": ["python"],
        "repo": {"name": REPO_NAME, "ref": "head"},
        "protect": ["tests/**", "**/conftest.py", "pytest.ini"],
        "verify": {
            "command": [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "--junitxml=report.xml", "tests"],
            "env": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
            "timeout_s": 60,
            "output": "junit",
            "report": "report.xml",
        },
        "grader": {"type": "verify"},
    }  # fmt: skip


def calc_checkout(state_dir: Path) -> Path:
    """The project's checkout under the demo's state directory, made once."""
    path = state_dir / "demo-calc"
    if (path / ".git").exists():
        return path
    path.mkdir(parents=True, exist_ok=True)
    for name, content in FILES.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(content)
    identity = ["-c", "user.name=Everdict demo", "-c", "user.email=demo@everdict.invalid"]
    for args in (["init", "-q"], ["add", "--all"], ["commit", "-q", "-m", "calc with a bug"]):
        subprocess.run(["git", "-C", str(path), *identity, *args], check=True)
    return path


def verified_run(watch: Callable[..., Any], console: Any) -> None:
    """The verified harness: the fix passes, the edited test is tampered and fails (`watch`
    starts a run on the demo's runner, says it, waits for it and summarises it)."""
    if not has_pytest():
        console.print(f"No pytest here: the {VERIFY_HARNESS} harness's verifier needs it.")
        return
    watch(
        harness=VERIFY_HARNESS,
        dataset=VERIFY_DATASET,
        says=", its agent's change verified by pytest: ",
    )
