"""The `Verify` stage on a real git checkout with real processes: protected paths compared
with the start commit and restored before the verifier runs, whatever the agent left running
killed first, hidden files only for the verifier, the verifier's answer read with bounds, its
timeout, and a timed-out agent still verified."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from runnercli.case.collect import Collect
from runnercli.case.consent.disclosure import world_lines
from runnercli.case.execute import Execute
from runnercli.case.limits.stage import Limits
from runnercli.case.pipeline import CaseContext, Pipeline, Stage
from runnercli.case.prepare import Prepare
from runnercli.case.repo import Worktrees
from runnercli.case.repo.stage import Repo
from runnercli.case.verify.protect import check_and_restore, snapshot_index
from runnercli.case.verify.report import ReportError, read_junit
from runnercli.case.verify.stage import Verify
from runnercli.protocol import CaseJob, CaseResult, HarnessSpec, harness_digest
from tests.runnercli.fakes import held
from tests.runnercli.gitrepos import git, write
from tests.runnercli.verifyrepo import (
    CONFTEST_PLANTER,
    FIXER,
    HIDDEN_TEST,
    LOOKER,
    PROTECT,
    TEST_EDITOR,
    TESTS,
    VERIFY,
    VERIFY_COMMAND,
    make_project,
)

pytestmark = pytest.mark.once
NAME = "acme/calc"


def job(agent: str, *, timeout_s: int = 30, hidden: dict[str, str] | None = None, **spec: Any):
    body = {
        "command": [sys.executable, "-c", agent],
        "timeout_s": timeout_s,
        "repo": {"name": NAME, "ref": "head"},
        "protect": PROTECT,
        "verify": VERIFY,
        "grader": {"type": "verify"},
        **spec,
    }
    harness = HarnessSpec.model_validate(body)
    return CaseJob.model_validate(
        {
            "job_id": 1,
            "attempt_id": 1,
            "lease_epoch": 1,
            "run_id": 1,
            "workspace": "acme",
            "submitted_by": "alice",
            "case": {"key": "c1", "input": {"task": "fix add"}},
            "harness": {
                "name": "agent",
                "version": 1,
                "digest": harness_digest(harness),
                "author": "alice",
                "spec": harness.model_dump(mode="json"),
            },
            "capabilities": [f"repo:{NAME}"],
            "timeout_s": timeout_s,
            "hidden": hidden,
        }
    )


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    path = tmp_path / "calc"
    make_project(path)
    return path


def run(job: CaseJob, project: Path) -> tuple[CaseResult, CaseContext]:
    repo = Repo(Worktrees(), {NAME: str(project)}, max_diff_bytes=lambda: 1 << 20)
    verify = Verify(repo)
    stages: list[Stage] = [
        Prepare(),
        repo,
        verify,
        Execute(term_grace_s=0.2),
        verify.reap(),
        Collect(),
    ]
    notes: list[str] = []
    case = CaseContext(held(job), notes=[notes.append])
    asyncio.run(Pipeline(stages).run(case))
    assert case.ending is None, (case.ending, notes)
    assert case.result is not None
    # However it ended, the member's checkout is as it was and no worktree is left.
    assert git(project, "status", "--porcelain") == ""
    assert git(project, "worktree", "list").count("\n") == 0
    return case.result, case


def outcomes(result: CaseResult) -> dict[str, list[str]]:
    assert result.verify is not None and result.verify.outcome is not None, result.verify
    tests = result.verify.outcome.tests
    assert tests is not None
    return {"passed": tests.passed, "failed": tests.failed, "errored": tests.errored}


def test_a_fix_passes_and_an_honest_agents_byproducts_flag_nothing(project: Path) -> None:
    result, _ = run(job(FIXER), project)
    assert result.status == "completed" and result.tampered == []
    assert outcomes(result) == {
        "passed": ["tests.test_calc.test_add", "tests.test_calc.test_zero"],
        "failed": [],
        "errored": [],
    }
    assert result.verify is not None and result.verify.exit_code == 0
    assert "2 passed" in result.verify.stdout_tail
    phases = result.phases
    assert phases is not None and phases.agent_s > 0 and phases.verify_s > 0
    assert phases.setup_s > 0 and phases.collect_s >= 0


def test_an_edited_test_is_tampering_and_the_verifier_runs_the_restored_one(
    project: Path,
) -> None:
    result, _ = run(job(TEST_EDITOR), project)
    assert [t.model_dump() for t in result.tampered or []] == [
        {"path": "tests/test_calc.py", "change": "modified"}
    ]
    # The restored test fails on the unfixed bug: it is what the verifier ran.
    assert outcomes(result)["failed"] == ["tests.test_calc.test_add"]


def test_a_planted_conftest_is_tampering_and_removed_before_the_verifier(project: Path) -> None:
    result, _ = run(job(CONFTEST_PLANTER), project)
    assert [(t.path, t.change) for t in result.tampered or []] == [("conftest.py", "added")]
    assert outcomes(result)["failed"] == ["tests.test_calc.test_add"]


def test_a_process_that_left_the_agents_session_is_killed_before_anything_is_read(
    project: Path,
) -> None:
    # It double-forks into a session of its own and rewrites the test and the code a
    # moment later, while the verifier would run.
    sneaky = """
import os, subprocess, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        # Its output let go: the agent's pipes close, nothing waits for it.
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        time.sleep(1.0)
        open("tests/test_calc.py", "w").write("def test_add():\\n    pass\\n")
        open("calc.py", "w").write("def add(a, b):\\n    return a + b\\n")
        os._exit(0)
    os._exit(0)
time.sleep(0.1)
print("left a daemon behind")
"""
    slow = {**VERIFY, "command": ["sh", "-c", 'sleep 1.5; exec "$@"', "sh", *VERIFY_COMMAND]}
    result, _ = run(job(sneaky, verify=slow), project)
    assert result.tampered == []
    assert outcomes(result)["failed"] == ["tests.test_calc.test_add"]


def test_hidden_tests_reach_the_verifier_alone(project: Path) -> None:
    hidden = {"tests/test_hidden.py": HIDDEN_TEST}
    result, case = run(job(LOOKER, hidden=hidden), project)
    said = json.loads(result.output)
    assert said["saw_hidden"] is False
    assert not any("test_hidden" in name for name in said["files"])
    assert "tests.test_hidden.test_hidden_negative" in outcomes(result)["passed"]
    # Writing them was not tampering, and they are not in the repo's diff.
    assert result.tampered == []
    assert "test_hidden" not in case.env.get("EVERDICT_CASE_FILE", "")


def test_a_timed_out_agent_is_still_verified_and_reported_completed(project: Path) -> None:
    agent = FIXER.replace('print("fixed")', "import time; time.sleep(30)")
    result, _ = run(job(agent, timeout_s=2), project)
    assert result.status == "completed"
    assert result.stopped is not None and result.stopped.by == "timeout"
    assert outcomes(result)["failed"] == []


def test_a_verifier_outliving_its_timeout_is_an_error_naming_it(project: Path) -> None:
    stuck = {"command": ["sh", "-c", "sleep 60 & sleep 60"], "timeout_s": 1}
    result, _ = run(job(FIXER, verify=stuck, grader={"type": "exit_code"}), project)
    assert result.verify is not None and result.verify.error is not None
    assert "the verifier (sh -c 'sleep 60 & sleep 60') outlived its 1-second timeout" in (
        result.verify.error
    )


def test_a_json_verifier_is_read_strictly(project: Path) -> None:
    good = {"command": ["echo", '{"pass": true, "score": 0.5, "reason": "half"}'], "output": "json"}
    result, _ = run(job(FIXER, verify=good), project)
    assert result.verify is not None and result.verify.outcome is not None
    assert result.verify.outcome.model_dump(by_alias=True, exclude_none=True) == {
        "pass": True,
        "score": 0.5,
        "reason": "half",
    }
    bad = {"command": ["echo", '{"pass": "yes"}'], "output": "json"}
    result, _ = run(job(FIXER, verify=bad), project)
    assert result.verify is not None and result.verify.error is not None
    assert '"pass": true or false' in result.verify.error


def test_junit_reports_are_read_with_bounds() -> None:
    bomb = (
        b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        b'<!ENTITY lol2 "&lol;&lol;&lol;&lol;">]><testsuite><testcase name="&lol2;"/></testsuite>'
    )
    with pytest.raises(ReportError, match="refused"):
        read_junit(bomb)
    with pytest.raises(ReportError, match="malformed"):
        read_junit(b"<testsuite><testcase></testsuite>")
    deep = b"<a>" * 40 + b"</a>" * 40
    with pytest.raises(ReportError, match="deeper"):
        read_junit(deep)
    many = b"<testsuite>" + b'<testcase name="t"/>' * 5001 + b"</testsuite>"
    with pytest.raises(ReportError, match="over 5000 tests"):
        read_junit(many)


def test_every_kind_of_change_to_a_protected_path_is_named_and_put_back(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    start = make_project(repo)
    write(repo, {"tests/data/a.txt": "a\n", "tests/run.sh": "echo\n", "tests/link": ""})
    (repo / "tests/link").unlink()
    os.symlink("data/a.txt", repo / "tests/link")
    git(repo, "add", "--all")
    git(repo, "-c", "user.name=M", "-c", "user.email=m@x", "commit", "-qm", "more")
    start = git(repo, "rev-parse", "HEAD")
    before = git(repo, "ls-files", "-s")
    # modified, added, deleted, renamed, mode, symlink, and an ignored byproduct.
    (repo / "tests/test_calc.py").write_text("x")
    write(repo, {"tests/new_test.py": "y", "tests/__pycache__/x.pyc": "z"})
    (repo / "pytest.ini").unlink()
    (repo / "tests/data/a.txt").rename(repo / "tests/moved.txt")
    os.chmod(repo / "tests/run.sh", 0o755)
    (repo / "tests/link").unlink()
    os.symlink("/etc/passwd", repo / "tests/link")
    changes = check_and_restore(repo, start, PROTECT)
    assert [(c.path, c.change) for c in changes] == [
        ("pytest.ini", "deleted"),
        ("tests/data/a.txt", "renamed"),
        ("tests/link", "modified"),
        ("tests/new_test.py", "added"),
        ("tests/run.sh", "mode"),
        ("tests/test_calc.py", "modified"),
    ]
    assert (repo / "tests/test_calc.py").read_text() == TESTS
    assert not (repo / "tests/new_test.py").exists() and not (repo / "tests/moved.txt").exists()
    assert os.readlink(repo / "tests/link") == "data/a.txt"
    assert git(repo, "ls-files", "-s") == before
    assert git(repo, "status", "--porcelain") == ""
    # A directory replaced by a symbolic link to a copy the agent controls.
    (repo / "elsewhere").mkdir()
    write(repo / "elsewhere", {"test_calc.py": "def test_add():\n    pass\n"})
    os.rename(repo / "tests", repo / "tests.orig")
    os.symlink(repo / "elsewhere", repo / "tests")
    changes = check_and_restore(repo, start, ["tests/**"])
    assert ("tests/test_calc.py", "symlink") in [(c.path, c.change) for c in changes]
    assert not (repo / "tests").is_symlink()
    assert (repo / "tests/test_calc.py").read_text() == TESTS


def test_the_consent_question_shows_the_verifier_protected_globs_and_hidden_paths_only() -> None:
    asked = "\n".join(
        world_lines(
            job(
                FIXER,
                hidden={"tests/test_hidden.py": HIDDEN_TEST},
                protect=["tests/**"],
                limits={"max_turns": 14, "max_tokens": 30000},
            )
        )
    )
    assert "verify:      " in asked and "'--junitxml=report.xml'" in asked
    assert "protect:     'tests/**' (checked and restored after the agent; a change fails" in asked
    assert "limits:      14 turns, 30,000 tokens per case" in asked
    assert "hidden:      'tests/test_hidden.py' written into the worktree after the agent" in asked
    assert "add(-2, -3)" not in asked


def test_the_index_copy_spares_reading_unchanged_files_but_not_a_backdated_edit(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "r"
    start = make_project(repo)
    time.sleep(1.1)  # past git's racy window
    index = snapshot_index(repo)
    assert index is not None
    target = repo / "tests/test_calc.py"
    before = target.stat()
    target.write_text(TESTS.replace("== 5", "== 6"))  # same size
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))  # same mtime
    # `git add` in the worktree changes the live index, not the copy taken before.
    git(repo, "add", "tests/test_calc.py")
    changes = check_and_restore(repo, start, PROTECT, index)
    assert [(c.path, c.change) for c in changes] == [("tests/test_calc.py", "modified")]
    assert target.read_text() == TESTS


def test_a_change_to_a_file_the_checkout_marks_assume_unchanged_is_seen(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    start = make_project(repo)
    git(repo, "update-index", "--assume-unchanged", "tests/test_calc.py")
    index = snapshot_index(repo)
    (repo / "tests/test_calc.py").write_text(TESTS.replace("== 5", "== -1"))
    changes = check_and_restore(repo, start, PROTECT, index)
    assert [(c.path, c.change) for c in changes] == [("tests/test_calc.py", "modified")]
    assert (repo / "tests/test_calc.py").read_text() == TESTS


def test_a_sparse_checkouts_absent_paths_stay_unflagged_and_what_lands_there_is_added(
    project: Path,
) -> None:
    # A sparse checkout of the member's without `tests/`: git gives the case's worktree the
    # same patterns, and `tests/test_calc.py` is there marked skip-worktree and not on disk.
    git(project, "sparse-checkout", "set", "--no-cone", "/*", "!/tests/")
    assert not (project / "tests").exists()
    sparse_worktree = """
from pathlib import Path
import subprocess
marks = subprocess.run(["git", "ls-files", "-v", "tests"], capture_output=True, text=True)
print(marks.stdout, Path("tests").exists())
"""
    result, _ = run(job(sparse_worktree, verify={**VERIFY, "command": ["true"]}), project)
    assert result.output.startswith("S tests/test_calc.py\n False"), result.output
    assert result.tampered == []  # absent as it started: not deleted

    plant = """
from pathlib import Path
Path("tests").mkdir()
Path("tests/test_calc.py").write_text("def test_add():\\n    pass\\n")
"""
    result, _ = run(job(plant), project)
    assert result.tampered is not None, result
    assert [(t.path, t.change) for t in result.tampered] == [("tests/test_calc.py", "added")]
    # Removed before the verifier ran: it found no test to run.
    assert result.verify is not None and result.verify.exit_code == 5, result.verify


@pytest.mark.parametrize("racy", [False, True], ids=["settled", "same-moment"])
def test_what_the_agent_configures_in_the_checkout_hides_no_change(
    tmp_path: Path, racy: bool
) -> None:
    repo = tmp_path / "r"
    start = make_project(repo)
    if not racy:
        time.sleep(1.1)  # past git's racy window
    index = snapshot_index(repo)
    # A clean filter that gives git the original test whatever the file holds, a monitor
    # that says nothing changed, and stat data git is told not to trust.
    original = tmp_path / "original.py"
    original.write_text(TESTS)
    monitor = tmp_path / "monitor.sh"
    monitor.write_text("#!/bin/sh\nprintf 'token\\0'\n")
    monitor.chmod(0o755)
    for key, value in {
        "filter.hide.clean": f"cat {original}",
        "filter.hide.required": "true",
        "core.fsmonitor": str(monitor),
        "core.ignoreStat": "true",
        "core.trustctime": "false",
        "core.checkStat": "minimal",
    }.items():
        git(repo, "config", key, value)
    write(repo, {".gitattributes": "tests/** filter=hide\n"})
    (repo / ".git" / "info").mkdir(exist_ok=True)
    (repo / ".git" / "info" / "attributes").write_text("* filter=hide\n")
    (repo / "tests/test_calc.py").write_text("")  # emptied, as a racy entry would read
    changes = check_and_restore(repo, start, PROTECT, index)
    assert [(c.path, c.change) for c in changes] == [("tests/test_calc.py", "modified")]
    assert (repo / "tests/test_calc.py").read_text() == TESTS


# Claude's stream: each assistant message comes as two lines (two content blocks) with the
# same id and usage, 2,000 tokens a message; it would go on for 100 messages.
STREAMER = """
import json, sys, time
from pathlib import Path
Path("calc.py").write_text(Path("calc.py").read_text().replace("a - b", "a + b"))
for n in range(1, 101):
    usage = {"input_tokens": 1000, "output_tokens": 1000}
    for block in ("thinking", "text"):
        message = {"id": f"msg_{n}", "usage": usage, "content": [{"type": block, block: "hm"}]}
        print(json.dumps({"type": "assistant", "message": message}), flush=True)
    Path(f"../printed-{n}").write_text("")
    time.sleep(0.15)
"""


def test_a_budget_stops_the_agent_within_one_event_and_the_verifier_still_runs(
    project: Path,
) -> None:
    built = job(STREAMER, output="claude-stream-json", limits={"max_tokens": 30000})
    repo = Repo(Worktrees(), {NAME: str(project)}, max_diff_bytes=lambda: 1 << 20)
    verify = Verify(repo)
    stages: list[Stage] = [
        Prepare(),
        repo,
        verify,
        Limits(),
        Execute(term_grace_s=0.2),
        verify.reap(),
        Collect(),
    ]
    notes: list[str] = []
    case = CaseContext(held(built), notes=[notes.append])
    printed: list[int] = []

    async def main() -> None:
        async def watch() -> None:
            while case.outcome is None:
                printed[:] = [len(list(case.directory.glob("printed-*")))]
                await asyncio.sleep(0.01)

        watcher = asyncio.create_task(watch())
        await Pipeline(stages).run(case)
        await watcher

    asyncio.run(main())
    result = case.result
    assert case.ending is None and result is not None, (case.ending, notes)
    assert result.status == "completed"
    assert result.stopped is not None and result.stopped.model_dump() == {
        "by": "limit",
        "limit": "max_tokens",
        "used": {"tokens": 32000, "turns": 16},
        "limits": {"max_tokens": 30000},
    }
    assert "stopped at 32,000 of 30,000 tokens after 16 turns" in notes
    # Stopped within the event that passed the limit: message 17 never came.
    assert printed and 15 <= printed[0] <= 16, printed
    assert outcomes(result)["failed"] == [] and result.tampered == []


# A harness of its own kind: no stream, its use in `usage` events appended to its trace
# file, each written twice under one id (as a retried write would), 2,000 tokens a call.
TRACE_WRITER = """
import json, os, time
from pathlib import Path
Path("calc.py").write_text(Path("calc.py").read_text().replace("a - b", "a + b"))
with open(os.environ["EVERDICT_TRACE_FILE"], "a") as trace:
    for n in range(1, 101):
        for _ in range(2):
            data = {"id": f"call-{n}", "input_tokens": 1500, "output_tokens": 500}
            trace.write(json.dumps({"kind": "usage", "name": "model", "data": data}) + "\\n")
            trace.flush()
        with open(PRINTED, "a") as printed:
            printed.write(f"{n}\\n")
        time.sleep(0.15)
"""


def test_a_trace_files_usage_events_count_toward_the_limits(project: Path) -> None:
    printed = project.parent / "printed"
    built = job(f"PRINTED = {str(printed)!r}\n{TRACE_WRITER}", limits={"max_tokens": 30000})
    repo = Repo(Worktrees(), {NAME: str(project)}, max_diff_bytes=lambda: 1 << 20)
    verify = Verify(repo)
    stages: list[Stage] = [
        Prepare(),
        repo,
        verify,
        Limits(),
        Execute(term_grace_s=0.2),
        verify.reap(),
        Collect(),
    ]
    notes: list[str] = []
    case = CaseContext(held(built), notes=[notes.append])
    asyncio.run(Pipeline(stages).run(case))
    result = case.result
    assert case.ending is None and result is not None, (case.ending, notes)
    assert result.status == "completed"
    assert result.stopped is not None and result.stopped.model_dump() == {
        "by": "limit",
        "limit": "max_tokens",
        "used": {"tokens": 32000, "turns": 16},
        "limits": {"max_tokens": 30000},
    }
    assert "stopped at 32,000 of 30,000 tokens after 16 turns" in notes
    # Stopped within a look at the file of the call that passed the limit.
    calls = len(printed.read_text().split())
    assert 16 <= calls <= 17, calls
    assert outcomes(result)["failed"] == [] and result.tampered == []


def test_submits_summary_counts_tampered_results() -> None:
    from runnercli.submit.run import _summary_line

    summary = {"pass": 1, "fail": 2, "error": 0, "stderr": None, "pass_fraction": 0.33}
    run: dict[str, Any] = {
        "id": 7,
        "status": "completed",
        "summary": {**summary, "cases": 3, "flaky": 0},
    }
    assert not _summary_line(run).endswith("tampered")
    run["summary"]["tampered"] = 2
    assert _summary_line(run).endswith("· 0 flaky · 2 tampered")


def test_orphans_that_end_on_their_own_are_reaped_once_stale() -> None:
    import subprocess as sp

    from runnercli.case.verify.reaper import (
        STALE_ZOMBIE_S,
        become_subreaper,
        descendants,
        reap_stale_zombies,
    )

    assert become_subreaper()
    # A double fork whose grandchild ends at once: it comes to this process and is a zombie.
    sp.run([sys.executable, "-c", "import os\nif os.fork() == 0:\n    os._exit(0)"], check=True)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        zombies = [p for p in descendants(os.getpid()) if p.zombie and p.ppid == os.getpid()]
        if zombies:
            break
        time.sleep(0.05)
    assert zombies
    now = time.monotonic()
    assert reap_stale_zombies(now) == 0  # first seen: perhaps a child the loop will collect
    assert reap_stale_zombies(now + STALE_ZOMBIE_S) >= 1
    assert not [p for p in descendants(os.getpid()) if p.pid == zombies[0].pid]
