"""`python -m runnercli push` and `submit --harness-file` end to end: the real server, the real
CLI in a repo holding `.everdict/`, and what each file became."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from accounts.services import api_key_create
from runners.services import runner_pair
from scorecards.models import DatasetVersion, HarnessVersion, Run
from tests.live import LiveServer, daphne

# The CLI and the tool end to end; the push's one transaction is the service's, tested on
# both engines (tests/scorecards/test_push.py): one database pass runs these.
pytestmark = [pytest.mark.e2e, pytest.mark.once, pytest.mark.django_db(transaction=True)]

ECHO = """\
command: [python, -c, "print('{input.text}')"]
timeout_s: 30
"""
FIXER = """\
agent:
  cli: claude-code
  model: claude-sonnet-4-5
grader:
  type: contains
"""
CASES = '{"key": "a", "input": {"text": "hi"}, "expected": "hi"}\n'


def cli(server: LiveServer, key: str, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update({"EVERDICT_API_KEY": key, "EVERDICT_SERVER": server.url, "NO_COLOR": "1"})
    return subprocess.run(
        [sys.executable, "-m", "runnercli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def write(repo: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = repo / ".everdict" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "app"
    write(
        root,
        {"harnesses/echo.yaml": ECHO, "harnesses/fixer.yaml": FIXER, "datasets/qa.jsonl": CASES},
    )
    (root / "src").mkdir()
    return root


@pytest.fixture
def key(alice: Any, workspace: Any) -> str:
    return api_key_create(user=alice).key


def versions() -> list[tuple[str, int]]:
    harnesses = HarnessVersion.objects.values_list("name", "version")
    datasets = DatasetVersion.objects.values_list("name", "version")
    return sorted([*harnesses, *datasets])


def test_pushed_twice_then_one_changed_file_then_a_yaml_error(
    key: str, repo: Path, tmp_path: Path
) -> None:
    with daphne(tmp_path) as server:
        first = cli(server, key, repo / "src", "push")
        assert first.returncode == 0, first.stderr
        assert "+ .everdict/harnesses/fixer.yaml: fixer v1 created (new)" in first.stdout
        assert "pushed to acme: 3 created" in first.stdout
        assert versions() == [("echo", 1), ("fixer", 1), ("qa", 1)]
        fixer = HarnessVersion.objects.get(name="fixer")
        assert fixer.source is not None
        assert fixer.source["agent"]["model"] == "claude-sonnet-4-5"
        assert fixer.spec["output"] == "claude-stream-json"

        again = cli(server, key, repo, "push", "--workspace", "acme")
        assert again.returncode == 0, again.stderr
        assert "= .everdict/datasets/qa.jsonl: qa v1 unchanged" in again.stdout
        assert "pushed to acme: 3 unchanged" in again.stdout
        assert versions() == [("echo", 1), ("fixer", 1), ("qa", 1)]

        write(repo, {"harnesses/echo.yaml": ECHO.replace("30", "60")})
        dry = cli(server, key, repo, "push", "--dry-run")
        assert "~ .everdict/harnesses/echo.yaml: echo v2 would be created (was v1)" in dry.stdout
        assert "    timeout_s: 30 → 60" in dry.stdout
        assert versions() == [("echo", 1), ("fixer", 1), ("qa", 1)]
        changed = cli(server, key, repo, "push")
        assert changed.returncode == 0, changed.stderr
        assert "+ .everdict/harnesses/echo.yaml: echo v2 created (was v1)" in changed.stdout
        assert "pushed to acme: 1 created, 2 unchanged" in changed.stdout
        assert versions() == [("echo", 1), ("echo", 2), ("fixer", 1), ("qa", 1)]

        write(repo, {"harnesses/fixer.yaml": FIXER + "  field: [result\n"})
        write(repo, {"datasets/qa.jsonl": CASES + '{"key": "b", "expected": "yo"}\n'})
        refused = cli(server, key, repo, "push")
        assert refused.returncode == 2
        assert ".everdict/harnesses/fixer.yaml:6: not valid YAML" in refused.stderr
        assert "nothing was sent" in refused.stderr
        assert versions() == [("echo", 1), ("echo", 2), ("fixer", 1), ("qa", 1)]


def test_what_the_server_refuses_is_named_by_file_and_line_and_nothing_is_created(
    key: str, bob: Any, repo: Path, tmp_path: Path
) -> None:
    write(repo, {"datasets/qa.jsonl": CASES + '\n{"key": "a", "expected": "twice"}\n'})
    write(repo, {"datasets/more.jsonl": '{"key": "x"}\n{"key": "y", "input": 1, "oops": 2}\n'})
    with daphne(tmp_path) as server:
        refused = cli(server, key, repo, "push")
        member = cli(server, api_key_create(user=bob).key, repo, "push", "--workspace", "acme")
    assert refused.returncode == 2
    assert "✗ .everdict/datasets/more.jsonl:2: cases[1].oops: Extra inputs" in refused.stderr
    assert "✗ .everdict/datasets/qa.jsonl: Duplicate case keys: 'a'." in refused.stderr
    assert "nothing was created" in refused.stderr
    assert member.returncode == 2
    assert "This needs the admin role in workspace 'acme'." in member.stderr
    assert versions() == []


def test_submit_pushes_its_harness_file_then_runs_that_version(
    key: str, alice: Any, repo: Path, tmp_path: Path
) -> None:
    # Offline: the run's jobs wait for it, which is all this needs.
    runner_pair(owner=alice, label="laptop", capabilities=["python"])
    with daphne(tmp_path) as server:
        assert cli(server, key, repo, "push").returncode == 0
        write(repo, {"harnesses/echo.yaml": ECHO.replace("30", "45")})
        args = ["--workspace", "acme", "--dataset", "qa", "--runtime", "self:any"]
        started = cli(
            server, key, repo, "submit", "--harness-file", ".everdict/harnesses/echo.yaml", *args
        )
    assert started.returncode == 0, started.stderr
    assert "+ .everdict/harnesses/echo.yaml: echo v2 created (was v1)" in started.stdout
    run = Run.objects.get()
    assert (run.harness.name, run.harness.version) == ("echo", 2)
    assert run.harness.spec["timeout_s"] == 45
