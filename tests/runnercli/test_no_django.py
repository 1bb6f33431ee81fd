"""The runner installs and runs without the server: a fresh venv, `pip install` with no extras.

Slow (a real venv and a real `pip install`, ~20 s with a warm cache), and kept in the suite:
it is the only check that the runner imports nothing of the server.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.live import ROOT

# The engine under the server does not change what this shows: one database pass runs it.
pytestmark = [pytest.mark.e2e, pytest.mark.once]

PROJECT_FILES = ["pyproject.toml", "README.md"]
PACKAGES = ["everdict", "runners", "scorecards", "mcpgateway", "runnercli"]


def _source_copy(dest: Path) -> Path:
    """The project as a member downloads it (building in the checkout would litter it)."""
    dest.mkdir()
    for name in PROJECT_FILES:
        shutil.copy2(ROOT / name, dest / name)
    for package in PACKAGES:
        shutil.copytree(
            ROOT / package, dest / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    return dest


def _run(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)


def test_the_cli_installed_alone_runs_with_no_django_present(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    base_python = getattr(sys, "_base_executable", sys.executable)
    assert _run([base_python, "-m", "venv", str(venv)]).returncode == 0
    python = str(venv / "bin" / "python")
    install = _run(
        [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         str(_source_copy(tmp_path / "src"))],
        timeout=600,
    )  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]

    no_django = _run([python, "-c", "import django"])
    assert no_django.returncode != 0
    assert "No module named 'django'" in no_django.stderr

    help_text = _run([python, "-m", "runnercli", "--help"])
    assert help_text.returncode == 0, help_text.stderr
    for command in ("pair", "run", "status", "doctor", "push"):
        assert command in help_text.stdout

    run_help = _run([str(venv / "bin" / "everdict-runner"), "run", "--help"])
    assert run_help.returncode == 0, run_help.stderr
    assert "--max-concurrent" in run_help.stdout

    every_module = _run(
        [python, "-c",
         "import sys, runnercli.cli, runnercli.commands.loop, runnercli.case.jobs,"
         " runnercli.case.log, runnercli.case.delivery.batches, runnercli.client.backoff,"
         " runnercli.console.exits, runnercli.client, runnercli.case.execute,"
         " runnercli.push.command, runnercli.push.tree, runnercli.protocol.presets;"
         "server = {'django', 'everdict', 'runners', 'scorecards', 'mcpgateway'};"
         "print(sorted(m for m in sys.modules if m.split('.')[0] in server))"],
    )  # fmt: skip
    assert every_module.returncode == 0, every_module.stderr
    assert every_module.stdout.strip() == "[]"
