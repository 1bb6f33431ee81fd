"""End to end, the member's repo in a case: daphne, the scheduler and `python -m runnercli` as
real processes, a real git checkout with a commit and uncommitted work.

Cases at `head`, `working` and `run` see exactly that content; four at once each get a
worktree of their own; the member's checkout, `.git/index` and stash list are byte for byte
as they were; no worktree stays registered after a case that ended, timed out, was canceled
or handed back by Ctrl-C, or whose runner was killed with `kill -9` (the next `run` removes
it); the member's `redact` patterns hide a token in what the server stores; a case that
edits files leaves a `repo.diff` of just those edits, redacted, that applies at its start.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from accounts.services import api_key_create
from everdict.processes import Proc
from runners.models import JobLogLine
from scorecards.models import CaseResult
from scorecards.services import dataset_create, harness_create
from tests.live import daphne, runner_cli, scheduler
from tests.runnercli.gitrepos import PNG, PNG2, git, make_checkout, snapshot, worktree_paths
from tests.runnercli.test_e2e import Api, gone, wait_file, wait_output

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

NAME = "acme/app"
LEASE_TTL_S = 3


@pytest.fixture
def api(workspace: Any, alice: Any, tmp_path: Path) -> Iterator[Api]:
    env = {"EVERDICT_LEASE_TTL_S": LEASE_TTL_S, "EVERDICT_QUEUE_IDLE_TIMEOUT_S": 120}
    with daphne(tmp_path, **env) as server, scheduler(tmp_path, **env):
        yield Api(server, api_key_create(user=alice, name="e2e").key)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    path = tmp_path / "member" / "app"
    make_checkout(path)
    return path


def repo_harness(
    user: Any, tmp_path: Path, name: str, source: str, args: list[str], ref: str, **spec: Any
) -> None:
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(source))
    harness_create(
        user=user,
        workspace_slug="acme",
        name=name,
        spec={
            "command": [sys.executable, str(script), *args],
            "timeout_s": 60,
            "capabilities": ["python"],
            "repo": {"name": NAME, "ref": ref},
            **spec,
        },
    )


def one_case(user: Any, name: str, key: str = "c1") -> None:
    dataset_create(user=user, workspace_slug="acme", name=name, cases=[{"key": key, "input": {}}])


def start_run(api: Api, harness: str, dataset: str, runner_id: int, **extra: Any) -> int:
    body = {"harness": harness, "dataset": dataset, "runtime": f"self:{runner_id}", **extra}
    return int(api.ok("POST", "/api/workspaces/acme/runs", body)["id"])


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def outputs(run: dict[str, Any]) -> dict[str, Any]:
    return {r["case"]: r["output"] for r in run["results"]}


def map_and_pair(api: Api, tmp_path: Path, checkout: Path, name: str = "laptop") -> int:
    """`repo add` first, then `pair`: pairing keeps the mapping."""
    config = tmp_path / f"{name}.json"  # the file `pair` and `run` of that name use
    added = runner_cli(
        tmp_path,
        ["repo", "add", NAME, str(checkout)],
        f"{name}-repo",
        EVERDICT_RUNNER_CONFIG=config,
    )
    assert added.popen.wait(30) == 0, added.output()
    return api.pair(tmp_path, name, name)


def start_runner(tmp_path: Path, name: str, *args: str) -> Proc:
    """A runner whose case directories are made under `tmp_path/cases` (its TMPDIR)."""
    (tmp_path / "cases").mkdir(exist_ok=True)
    proc = runner_cli(
        tmp_path, ["run", "--wait-ms", "2000", *args], name=name, TMPDIR=tmp_path / "cases"
    )
    wait_output(proc, "connected to")
    return proc


def case_dirs(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cases").glob("everdict-case-*"))


READER = """
    import hashlib, json, os, subprocess, sys
    from pathlib import Path
    here = Path.cwd()
    def read(name):
        path = here / name
        return path.read_text() if path.exists() else None
    print(json.dumps({
        "cwd": str(here),
        "env": os.environ["EVERDICT_REPO_DIR"],
        "arg": sys.argv[1],
        "head": subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                               text=True).stdout.strip(),
        "app": read("src/app.py"),
        "readme": read("README.md"),
        "gone": read("gone.txt"),
        "staged_new": read("staged-new.txt"),
        "untracked": read("notes.txt"),
        "logo": hashlib.sha256((here / "logo.png").read_bytes()).hexdigest(),
    }))
"""

# Each of four cases waits until all four have started, so they run at once.
TOGETHER = """
    import json, os, sys, time
    from pathlib import Path
    barrier = Path(sys.argv[1])
    (barrier / sys.argv[2]).write_text(os.getcwd())
    deadline = time.monotonic() + 30
    while len(list(barrier.iterdir())) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    Path("mine.txt").write_text(sys.argv[2])
    print(json.dumps({"cwd": os.getcwd(), "together": len(list(barrier.iterdir())),
                      "files": sorted(p.name for p in Path(".").iterdir() if p.name != ".git")}))
"""


def test_cases_at_head_working_and_run_see_their_content_four_at_once_and_the_checkout_stays(
    api: Api, alice: Any, tmp_path: Path, checkout: Path
) -> None:
    first = git(checkout, "rev-list", "--max-parents=0", "HEAD")
    head = git(checkout, "rev-parse", "HEAD")
    before = snapshot(checkout)
    index_bytes = (checkout / ".git" / "index").read_bytes()
    for ref in ("head", "working", "run"):
        repo_harness(alice, tmp_path, f"read-{ref}", READER, ["{repo.path}"], ref)
    one_case(alice, "one")
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    repo_harness(alice, tmp_path, "together", TOGETHER, [str(barrier), "{case.key}"], "head")
    dataset_create(
        user=alice,
        workspace_slug="acme",
        name="four",
        cases=[{"key": f"k{n}", "input": {}} for n in range(4)],
    )
    runner_id = map_and_pair(api, tmp_path, checkout)
    runner = start_runner(tmp_path, "laptop", "--max-concurrent", "4")
    try:
        runs = {
            "head": start_run(api, "read-head", "one", runner_id),
            "working": start_run(api, "read-working", "one", runner_id),
            "run": start_run(api, "read-run", "one", runner_id, metadata={"git_sha": first}),
        }
        seen = {
            ref: json.loads(outputs(api.wait_run(run_id))["c1"]) for ref, run_id in runs.items()
        }
        four = api.wait_run(start_run(api, "together", "four", runner_id, concurrency=4))
    finally:
        assert runner.stop(signal.SIGTERM) == 0, runner.output()

    for ref, what in seen.items():
        assert what["cwd"] == what["env"] == what["arg"], ref
        assert Path(what["cwd"]).parent.parent == tmp_path / "cases", ref
    assert {ref: what["head"] for ref, what in seen.items()} == {
        "head": head,
        "working": head,
        "run": first,
    }
    assert seen["head"] | {"cwd": 0, "env": 0, "arg": 0} == {
        "cwd": 0, "env": 0, "arg": 0, "head": head, "app": "print(1)\n", "readme": "hello\n",
        "gone": "to be deleted\n", "staged_new": None, "untracked": None, "logo": sha(PNG),
    }  # fmt: skip
    assert seen["working"] | {"cwd": 0, "env": 0, "arg": 0} == {
        "cwd": 0, "env": 0, "arg": 0, "head": head, "app": "print(2)\n",
        "readme": "hello, staged\n", "gone": None, "staged_new": "added, not committed\n",
        "untracked": None, "logo": sha(PNG2),
    }  # fmt: skip
    assert (seen["run"]["app"], seen["run"]["gone"], seen["run"]["logo"]) == (
        "print(0)\n",
        None,
        sha(PNG),
    )
    fingerprints = {
        ref: CaseResult.objects.get(run_id=run_id).fingerprint["repo"]
        for ref, run_id in runs.items()
    }
    assert fingerprints == {
        "head": {"name": NAME, "sha": head, "dirty": False, "base": "head"},
        "working": {"name": NAME, "sha": head, "dirty": True, "base": "working"},
        "run": {"name": NAME, "sha": first, "dirty": False, "base": "run"},
    }

    together = [json.loads(output) for output in outputs(four).values()]
    assert len(together) == 4 and all(t["together"] == 4 for t in together)
    assert len({t["cwd"] for t in together}) == 4
    # Each case saw its own worktree: only the file it wrote itself.
    assert all("mine.txt" in t["files"] for t in together)

    assert snapshot(checkout) == before
    assert (checkout / ".git" / "index").read_bytes() == index_bytes
    assert git(checkout, "stash", "list") == ""
    assert worktree_paths(checkout) == []
    assert case_dirs(tmp_path) == []


# Hangs while the flag file exists (writing where it runs first), else ends at once.
HANGER = """
    import os, sys, time
    from pathlib import Path
    marks, flag = Path(sys.argv[1]), Path(sys.argv[2])
    n = len(list(marks.iterdir()))
    (marks / f"{n}.txt").write_text(f"{os.getpid()} {os.getcwd()}")
    Path("scribbled.txt").write_text("the case was here")
    while flag.exists():
        time.sleep(0.1)
    print("done")
"""


def wait_until(done: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_no_worktree_stays_after_a_kill_9_of_the_runner_a_timeout_a_cancel_or_ctrl_c(
    api: Api, alice: Any, tmp_path: Path, checkout: Path
) -> None:
    marks, flag = tmp_path / "marks", tmp_path / "hang"
    marks.mkdir()
    flag.write_text("hang")
    args = [str(marks), str(flag)]
    repo_harness(alice, tmp_path, "hanger", HANGER, args, "working")
    repo_harness(alice, tmp_path, "slow", HANGER, args, "head", timeout_s=2)
    one_case(alice, "one")
    runner_id = map_and_pair(api, tmp_path, checkout)
    before = snapshot(checkout)

    # kill -9 of the runner mid-case: its worktree stays registered, its case keeps running.
    runner = start_runner(tmp_path, "laptop")
    killed_run = start_run(api, "hanger", "one", runner_id)
    pid, cwd = wait_file(marks / "0.txt").split(" ", 1)
    assert worktree_paths(checkout) == [cwd]
    runner.popen.send_signal(signal.SIGKILL)
    runner.popen.wait(10)
    flag.unlink()  # the orphaned case ends; the worktree it ran in stays registered
    wait_until(lambda: gone(int(pid)), "the orphaned case did not end")
    assert worktree_paths(checkout) == [cwd]

    # The next `run` removes it before it leases anything, then runs the case again.
    runner = start_runner(tmp_path, "laptop")
    try:
        assert f"removed a worktree a killed runner left: {cwd}" in runner.output()
        done = api.wait_run(killed_run)
        assert outputs(done) == {"c1": "done\n"}, done
        assert worktree_paths(checkout) == []

        # A case past its timeout.
        flag.write_text("hang")
        timed_out = api.wait_run(start_run(api, "slow", "one", runner_id))
        # Without a verifier, a timeout stays an error.
        told = [(r["status"], r["verdict"]) for r in timed_out["results"]]
        assert told == [("timeout", "error")], timed_out
        wait_until(lambda: worktree_paths(checkout) == [], "a timed-out case left its worktree")

        # A case canceled while it runs.
        canceled_run = start_run(api, "hanger", "one", runner_id)
        pid, cwd = wait_file(marks / "3.txt").split(" ", 1)
        assert worktree_paths(checkout) == [cwd]
        api.ok("POST", f"/api/runs/{canceled_run}/cancel")
        wait_until(lambda: gone(int(pid)), "the canceled case is still running")
        wait_until(lambda: worktree_paths(checkout) == [], "a canceled case left its worktree")

        # Ctrl-C twice while a case runs: the case is handed back, its worktree removed.
        stopped_run = start_run(api, "hanger", "one", runner_id)
        pid, cwd = wait_file(marks / "4.txt").split(" ", 1)
        assert worktree_paths(checkout) == [cwd]
        runner.popen.send_signal(signal.SIGINT)
        wait_output(runner, "stopping: finishing 1 running case(s)")
        runner.popen.send_signal(signal.SIGINT)
        assert runner.popen.wait(30) == 0, runner.output()
        assert "■ handed back" in runner.output()
        assert gone(int(pid))
        assert worktree_paths(checkout) == []
        api.ok("POST", f"/api/runs/{stopped_run}/cancel")
    finally:
        flag.unlink(missing_ok=True)
        runner.stop(signal.SIGTERM)
    assert api.wait_run(canceled_run)["status"] == "canceled"
    assert case_dirs(tmp_path) == []
    assert snapshot(checkout) == before


TOKEN = "ghp_" + "Q" * 36
LEAKY = f"""
    import sys
    print("cloning with {TOKEN} now", file=sys.stderr, flush=True)
    print("password=hunter2", file=sys.stderr, flush=True)
    print("the answer is 42; token {TOKEN}")
"""


def test_the_members_redact_patterns_hide_a_token_in_what_the_server_stores(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    script = tmp_path / "leaky.py"
    script.write_text(textwrap.dedent(LEAKY))
    harness_create(
        user=alice,
        workspace_slug="acme",
        name="leaky",
        spec={
            "command": [sys.executable, str(script)],
            "capabilities": ["python"],
            "grader": {"type": "contains"},
        },
    )
    dataset_create(
        user=alice,
        workspace_slug="acme",
        name="one",
        cases=[{"key": "c1", "input": {}, "expected": "the answer is 42; token [redacted]"}],
    )
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    config = tmp_path / "laptop.json"
    patterns = [r"ghp_[A-Za-z0-9]{36}", r"password=\S+"]
    config.write_text(json.dumps({**json.loads(config.read_text()), "redact": patterns}))
    runner = start_runner(tmp_path, "laptop")
    try:
        run_id = start_run(api, "leaky", "one", runner_id)
        run = api.wait_run(run_id)
    finally:
        assert runner.stop(signal.SIGTERM) == 0, runner.output()

    # The server graded the redacted output.
    assert run["results"][0]["verdict"] == "pass", run
    case = api.ok("GET", f"/api/runs/{run_id}/cases/c1")
    result = case["runs"][0]["result"]
    assert result["output"] == "the answer is 42; token [redacted]\n"
    assert "cloning with [redacted] now" in result["stderr_tail"]
    assert "[redacted]" in result["stderr_tail"] and "hunter2" not in result["stderr_tail"]
    lines = [log["line"] for log in api.logs(run_id)]
    assert "cloning with [redacted] now" in lines and "[redacted]" in lines
    stored = [
        *CaseResult.objects.filter(run_id=run_id).values_list("output", "stderr_tail"),
        *JobLogLine.objects.filter(run_id=run_id).values_list("line", flat=True),
    ]
    assert TOKEN not in repr(stored) and "hunter2" not in repr(stored)


EDITOR = f"""
    from pathlib import Path
    Path("src/app.py").write_text("print('edited by the case')\\n")
    Path("made").mkdir()
    Path("made/report.txt").write_text("pushed with {TOKEN}\\n")
    Path("README.md").unlink()
    Path("logo.png").write_bytes(Path("logo.png").read_bytes() + bytes(range(256)))
    print("edited")
"""


def download(api: Api, path: str) -> tuple[str, bytes]:
    request = urllib.request.Request(
        api.server.url + path, headers={"Authorization": f"Bearer {api.key}"}
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return reply.headers["Content-Type"], reply.read()


def test_a_case_that_edits_files_leaves_a_repo_diff_of_just_those_edits_redacted(
    api: Api, alice: Any, tmp_path: Path, checkout: Path
) -> None:
    repo_harness(alice, tmp_path, "editor", EDITOR, [], "head")
    one_case(alice, "one")
    runner_id = map_and_pair(api, tmp_path, checkout)
    config = tmp_path / "laptop.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "redact": ["ghp_\\w{36}"]}))
    before = snapshot(checkout)
    runner = start_runner(tmp_path, "laptop")
    try:
        run_id = start_run(api, "editor", "one", runner_id)
        assert outputs(api.wait_run(run_id)) == {"c1": "edited\n"}
    finally:
        assert runner.stop(signal.SIGTERM) == 0, runner.output()

    [listed] = api.ok("GET", f"/api/runs/{run_id}/cases/c1")["runs"][0]["result"]["artifacts"]
    assert (listed["path"], listed["media_type"]) == ("repo.diff", "text/x-diff")
    _, diff = download(api, listed["url"])
    assert hashlib.sha256(diff).hexdigest() == listed["sha256"]
    text = diff.decode()
    headers = [line for line in text.splitlines() if line.startswith("diff --git")]
    assert {line.split(" b/")[-1] for line in headers} == {
        "src/app.py",
        "made/report.txt",
        "README.md",
        "logo.png",
    }
    assert "-print(1)\n+print('edited by the case')\n" in text
    assert "+pushed with [redacted]\n" in text and TOKEN not in text
    assert "deleted file mode" in text and "GIT binary patch" in text

    # It is a patch of the commit the case started from: a clone of it takes it back.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(checkout), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "apply", "-"], input=diff, check=True)
    assert (clone / "src/app.py").read_text() == "print('edited by the case')\n"
    assert (clone / "made/report.txt").read_text() == "pushed with [redacted]\n"
    assert not (clone / "README.md").exists()
    assert (clone / "logo.png").read_bytes() == PNG + bytes(range(256))
    assert snapshot(checkout) == before
    assert worktree_paths(checkout) == []
