"""A small Python project with a bug and its pytest tests, as a real git checkout (the
verifier's stage and end-to-end tests), and the scripted agents the stage tests run on it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from scorecards.services import dataset_create, harness_create
from tests.runnercli.gitrepos import commit_all, git, write

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TESTS = (
    "from calc import add\n\n\n"
    "def test_add():\n    assert add(2, 3) == 5\n\n\n"
    "def test_zero():\n    assert add(0, 0) == 0\n"
)
HIDDEN_TEST = (
    "from calc import add\n\n\ndef test_hidden_negative():\n    assert add(-2, -3) == -5\n"
)
PROTECT = ["tests/**", "**/conftest.py", "pytest.ini"]
VERIFY_COMMAND = [
    sys.executable,
    "-m",
    "pytest",
    "-q",
    "-p",
    "no:cacheprovider",
    "--junitxml=report.xml",
    "tests",
]
VERIFY: dict[str, object] = {
    "command": VERIFY_COMMAND,
    "timeout_s": 60,
    # The project's tests need no plugin of the environment they run in.
    "env": {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    "output": "junit",
    "report": "report.xml",
}


def make_project(path: Path) -> str:
    """The project at `path` (a git checkout with one commit); return its commit."""
    path.mkdir(parents=True)
    git(path, "init", "--quiet", "--initial-branch=main")
    write(
        path,
        {
            ".gitignore": "__pycache__/\n*.pyc\nreport.xml\n",
            "calc.py": BUGGY,
            "pytest.ini": "[pytest]\npythonpath = .\n",
            "tests/test_calc.py": TESTS,
        },
    )
    return commit_all(path, "calc with a bug")


# Scripted agents: Python run as the harness's command in the worktree.
FIXER = f"""
from pathlib import Path
import os, subprocess, sys
Path("calc.py").write_text({FIXED!r})
# An honest agent runs the tests: its __pycache__ is ignored by the start commit's rules.
subprocess.run(
    [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
    env={{**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}},
)
print("fixed")
"""
TEST_EDITOR = """
from pathlib import Path
path = Path("tests/test_calc.py")
path.write_text(path.read_text().replace("== 5", "== -1").replace("== 0\\n", "== 0\\n"))
print("edited the test")
"""
CONFTEST_PLANTER = """
from pathlib import Path
Path("conftest.py").write_text(
    "import pytest\\n"
    "@pytest.hookimpl(hookwrapper=True)\\n"
    "def pytest_runtest_makereport(item, call):\\n"
    "    outcome = yield\\n"
    "    outcome.get_result().outcome = 'passed'\\n"
)
print("planted a conftest.py")
"""
# Lists its worktree, its environment and its case file: none may hold the hidden test.
LOOKER = """
import json, os
from pathlib import Path
files = sorted(str(p) for p in Path(".").rglob("*") if ".git" not in p.parts)
case_file = Path(os.environ["EVERDICT_CASE_FILE"]).read_text()
seen = json.dumps({"files": files, "env": dict(os.environ), "case": case_file})
saw = "hidden_negative" in seen or "add(-2, -3)" in seen
print(json.dumps({"saw_hidden": saw, "files": files}))
Path("calc.py").write_text(Path("calc.py").read_text().replace("a - b", "a + b"))
"""


# An agent that counts its runs (a pid a line) in the file it is given, then ends.
COUNTED_AGENT = """
import os, sys
with open(sys.argv[1], "a") as f:
    f.write(f"{os.getpid()}\\n")
print("done")
"""


def counted_harness(
    user: Any, tmp_path: Path, *, name: str, repo: str, verifier_source: str, flag: str
) -> tuple[Path, Path, Path]:
    """Harness `name` on `repo` (the counted agent, then `verifier_source` as its exit-code
    verifier, given its own count file and the path `flag`) and dataset "one" of one case;
    return the agent's and the verifier's count files and the flag's path."""
    agent, verifier = tmp_path / "agent.py", tmp_path / "verifier.py"
    agent.write_text(COUNTED_AGENT)
    verifier.write_text(verifier_source)
    agents, verifies, flagged = (tmp_path / n for n in ("agent.count", "verify.count", flag))
    harness_create(
        user=user,
        workspace_slug="acme",
        name=name,
        spec={
            "command": [sys.executable, str(agent), str(agents)],
            "timeout_s": 60,
            "capabilities": ["python"],
            "repo": {"name": repo, "ref": "head"},
            "verify": {
                "command": [sys.executable, str(verifier), str(verifies), str(flagged)],
                "timeout_s": 60,
                "output": "exit_code",
            },
            "grader": {"type": "verify"},
        },
    )
    dataset_create(user=user, workspace_slug="acme", name="one", cases=[{"key": "only"}])
    return agents, verifies, flagged
