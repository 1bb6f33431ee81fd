"""The `Repo` stage: a case of a harness with a repo runs in its own worktree of the member's
checkout — at head, working or run, seeing exactly that content — keeps what it changed as
`repo.diff`, and leaves no worktree behind however it ended. Real git, real processes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runnercli.case.collect import Collect
from runnercli.case.execute import Execute
from runnercli.case.pipeline import CaseContext, Failed, Pipeline, Stage
from runnercli.case.prepare import Prepare
from runnercli.case.repo import DIFF_CUT_MARKER, Worktrees
from runnercli.case.repo.diff import diff_since
from runnercli.case.repo.stage import Repo
from runnercli.protocol import CaseJob, HarnessSpec, harness_digest
from runnercli.session import JobRun
from runners.models import JobLogLine
from scorecards.models import CaseResult as CaseResultRow
from tests.runnercli.fakes import fake_client, fake_session, held
from tests.runnercli.gitrepos import PNG, PNG2, git, make_checkout, snapshot, worktree_paths
from tests.runnercli.leased import ObservedClient, blob_server, paired_run, session_over, stored
from tests.runnercli.test_job import handle, jobs

Script = Callable[[str], list[str]]
NAME = "acme/app"

# Prints what the case sees of the repo, as JSON.
READER = """
    import hashlib, json, os, sys
    from pathlib import Path
    here = Path.cwd()
    def read(name):
        path = here / name
        return path.read_bytes().decode("latin-1") if path.exists() else None
    print(json.dumps({
        "cwd": str(here),
        "env": os.environ.get("EVERDICT_REPO_DIR"),
        "arg": sys.argv[1],
        "app": read("src/app.py"),
        "readme": read("README.md"),
        "gone": read("gone.txt"),
        "staged_new": read("staged-new.txt"),
        "untracked": read("notes.txt"),
        "logo": hashlib.sha256((here / "logo.png").read_bytes()).hexdigest(),
        "status": os.popen("git status --porcelain").read(),
    }))
"""


def repo_job(
    command: list[str], ref: str = "head", *, git_sha: str | None = None, timeout_s: int = 30
) -> CaseJob:
    spec = HarnessSpec.model_validate(
        {"command": command, "timeout_s": timeout_s, "repo": {"name": NAME, "ref": ref}}
    )
    return CaseJob.model_validate(
        {
            "job_id": 1,
            "attempt_id": 1,
            "lease_epoch": 1,
            "run_id": 1,
            "workspace": "acme",
            "submitted_by": "alice",
            "case": {"key": "c1", "input": {}},
            "harness": {
                "name": "agent",
                "version": 1,
                "digest": harness_digest(spec),
                "author": "alice",
                "spec": spec.model_dump(mode="json"),
            },
            "capabilities": ["python", f"repo:{NAME}"],
            "timeout_s": timeout_s,
            "git_sha": git_sha,
        }
    )


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    path = tmp_path / "src" / "app"
    make_checkout(path)
    return path


@pytest.fixture
def cases_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the case directories are made (the runner's temporary directory)."""
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


def case_dirs(root: Path) -> list[Path]:
    """The case directories left under the runner's temporary directory."""
    return sorted(root.glob("everdict-case-*"))


def run_case(
    job: CaseJob,
    repos: dict[str, str],
    *,
    max_diff_bytes: int = 1 << 20,
    around: Callable[[CaseContext], Any] | None = None,
) -> tuple[CaseContext, Repo]:
    """The case through Prepare, Repo, Execute and Collect; `around` runs beside it."""
    repo = Repo(Worktrees(), repos, max_diff_bytes=lambda: max_diff_bytes)
    stages: list[Stage] = [Prepare(), repo, Execute(term_grace_s=0.2), Collect()]
    notes: list[str] = []
    case = CaseContext(held(job), notes=[notes.append])

    async def main() -> None:
        runs = asyncio.create_task(Pipeline(stages).run(case))
        if around is not None:
            await around(case)
        await runs

    asyncio.run(main())
    return case, repo


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def seen(case: CaseContext) -> dict[str, Any]:
    assert case.result is not None and case.result.exit_code == 0, case.result
    return dict(json.loads(case.result.output))


def test_cases_at_head_working_and_run_see_exactly_that_content_and_the_checkout_stays(
    checkout: Path, cases_root: Path, script: Script
) -> None:
    first = git(checkout, "rev-list", "--max-parents=0", "HEAD")
    head = git(checkout, "rev-parse", "HEAD")
    before = snapshot(checkout)
    repos = {NAME: str(checkout)}
    argv = [*script(READER), "{repo.path}"]

    at_head, _ = run_case(repo_job(argv, "head"), repos)
    at_working, _ = run_case(repo_job(argv, "working"), repos)
    at_run, _ = run_case(repo_job(argv, "run", git_sha=first[:12]), repos)

    head_seen, working_seen, run_seen = seen(at_head), seen(at_working), seen(at_run)
    for case, what in ((at_head, head_seen), (at_working, working_seen), (at_run, run_seen)):
        assert what["cwd"] == what["env"] == what["arg"]
        assert Path(what["cwd"]).name == "repo"
        assert Path(what["cwd"]).parent.parent == cases_root
        assert case.workdir == Path(what["cwd"])
    assert (head_seen["app"], head_seen["readme"], head_seen["gone"]) == (
        "print(1)\n",
        "hello\n",
        "to be deleted\n",
    )
    assert head_seen["staged_new"] is None and head_seen["status"] == ""
    assert (working_seen["app"], working_seen["readme"], working_seen["gone"]) == (
        "print(2)\n",
        "hello, staged\n",
        None,
    )
    assert working_seen["staged_new"] == "added, not committed\n"
    assert working_seen["untracked"] is None  # untracked files are not the member's changes
    # The member's changes show as uncommitted ones, on top of HEAD.
    assert " M src/app.py" in working_seen["status"]
    assert (run_seen["app"], run_seen["gone"]) == ("print(0)\n", None)
    assert head_seen["logo"] == run_seen["logo"] == sha256(PNG)
    assert working_seen["logo"] == sha256(PNG2)

    fingerprints = [c.result.fingerprint.repo for c in (at_head, at_working, at_run) if c.result]
    assert [f.model_dump() if f else None for f in fingerprints] == [
        {"name": NAME, "sha": head, "dirty": False, "base": "head"},
        {"name": NAME, "sha": head, "dirty": True, "base": "working"},
        {"name": NAME, "sha": first, "dirty": False, "base": "run"},
    ]
    assert snapshot(checkout) == before
    assert worktree_paths(checkout) == []
    assert case_dirs(cases_root) == []


EDITOR = """
    from pathlib import Path
    Path("src/app.py").write_text("print('edited by the case')\\n")
    Path("made").mkdir()
    Path("made/report.txt").write_text("new file\\n")
    Path("README.md").unlink()
    print("edited")
"""


def test_what_the_case_changed_is_kept_as_repo_diff_an_artifact_of_the_case(
    checkout: Path, cases_root: Path, script: Script
) -> None:
    kept: dict[str, bytes] = {}

    class Upload(Stage):
        """Where the artifacts stage would upload them: after every stage has finished."""

        async def finish(self, case: CaseContext) -> None:
            kept.update({a.path: a.source.read_bytes() for a in case.artifacts})
            kept["media_type"] = case.artifacts[0].media_type.encode()

    repo = Repo(Worktrees(), {NAME: str(checkout)}, max_diff_bytes=lambda: 1 << 20)
    case = CaseContext(held(repo_job(script(EDITOR), "working")))
    asyncio.run(Pipeline([Prepare(), repo, Execute(), Collect(), Upload()]).run(case))

    assert case.ending is None and case.result is not None
    assert case.result.output == "edited\n"
    diff = kept["repo.diff"]
    assert kept["media_type"] == b"text/x-diff"
    changed = {
        line.split(" b/")[-1]
        for line in diff.decode().splitlines()
        if line.startswith("diff --git")
    }
    assert changed == {"src/app.py", "made/report.txt", "README.md"}
    # Relative to where the case started: the member's uncommitted change, not HEAD.
    assert "-print(2)\n+print('edited by the case')\n" in diff.decode()
    assert "-hello, staged\n" in diff.decode()
    assert worktree_paths(checkout) == []


def test_repo_diff_shows_a_change_to_a_file_the_case_marked_assume_unchanged(
    checkout: Path,
) -> None:
    start = git(checkout, "rev-parse", "HEAD").strip()
    git(checkout, "update-index", "--assume-unchanged", "src/app.py")
    (checkout / "src/app.py").write_text("print('hidden?')\n")
    diff = asyncio.run(diff_since(checkout, start, 1 << 20)).decode()
    assert "+print('hidden?')\n" in diff
    assert git(checkout, "ls-files", "-v", "src/app.py").startswith("h ")  # its index untouched


def test_repo_diff_is_bounded_by_the_servers_artifact_limit(
    checkout: Path, cases_root: Path, script: Script
) -> None:
    big = 'from pathlib import Path\nPath("big.txt").write_text("line\\n" * 50_000)\n'
    limits = []

    class Upload(Stage):
        async def finish(self, case: CaseContext) -> None:
            limits.append(case.artifacts[0].source.read_bytes())

    repo = Repo(Worktrees(), {NAME: str(checkout)}, max_diff_bytes=lambda: 8192)
    case = CaseContext(held(repo_job(script(big), "head")))
    asyncio.run(Pipeline([Prepare(), repo, Execute(), Collect(), Upload()]).run(case))
    (diff,) = limits
    assert len(diff) <= 8192
    assert diff.endswith(DIFF_CUT_MARKER + b"\n")


def test_a_repo_not_mapped_here_ends_the_case_with_the_command_that_maps_it(
    checkout: Path, cases_root: Path, script: Script
) -> None:
    case, _ = run_case(repo_job(script("print('never')")), {"acme/other": str(checkout)})
    assert case.ending == Failed(
        "repo acme/app is not mapped on this machine: "
        "run `python -m runnercli repo add acme/app PATH`",
        summary="repo acme/app",
    )
    assert case.outcome is None
    assert case_dirs(cases_root) == []


def test_a_commit_missing_from_the_local_clone_ends_the_case_saying_to_fetch_it(
    checkout: Path, cases_root: Path, script: Script
) -> None:
    job = repo_job(script("print('never')"), "run", git_sha="abc1234")
    case, _ = run_case(job, {NAME: str(checkout)})
    assert isinstance(case.ending, Failed)
    assert case.ending.reason == (
        f"commit abc1234 is not in the local clone of acme/app at {checkout}: fetch it first"
    )
    assert case.outcome is None
    assert worktree_paths(checkout) == []


SLEEPER = """
    import os, sys, time
    from pathlib import Path
    Path("scribbled.txt").write_text("the case was here\\n")
    open(sys.argv[1], "w").write(os.getcwd())
    time.sleep(60)
"""


async def _wait_for(path: Path) -> str:
    async with asyncio.timeout(20):
        while not (path.exists() and path.read_text()):
            await asyncio.sleep(0.02)
    return path.read_text()


def test_a_killed_case_leaves_no_worktree(
    checkout: Path, cases_root: Path, script: Script, tmp_path: Path
) -> None:
    started = tmp_path / "started"

    async def kill_once_started(case: CaseContext) -> None:
        await _wait_for(started)
        assert len(worktree_paths(checkout)) == 1
        case.kill.set()

    job = repo_job([*script(SLEEPER), str(started)])
    case, _ = run_case(job, {NAME: str(checkout)}, around=kill_once_started)
    assert case.outcome is not None and case.outcome.status == "canceled"
    assert case.artifacts == []  # a case killed is not reported: no diff made
    assert worktree_paths(checkout) == []
    assert not Path(started.read_text()).exists()


def test_a_case_past_its_timeout_leaves_no_worktree(
    checkout: Path, cases_root: Path, script: Script, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    job = repo_job([*script(SLEEPER), str(started)], timeout_s=2)
    case, _ = run_case(job, {NAME: str(checkout)})
    assert case.outcome is not None and case.outcome.status == "timeout"
    # A timed-out case is reported, with what it changed before it was stopped.
    assert [a.path for a in case.artifacts] == ["repo.diff"]
    assert worktree_paths(checkout) == []
    assert case_dirs(cases_root) == []


def test_a_case_whose_task_is_cancelled_leaves_no_worktree(
    checkout: Path, cases_root: Path, script: Script, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    repo = Repo(Worktrees(), {NAME: str(checkout)}, max_diff_bytes=lambda: 1 << 20)
    case = CaseContext(held(repo_job([*script(SLEEPER), str(started)])))

    async def main() -> None:
        runs = asyncio.create_task(Pipeline([Prepare(), repo, Execute(), Collect()]).run(case))
        await _wait_for(started)
        runs.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runs

    asyncio.run(main())
    assert case.cancelled
    assert worktree_paths(checkout) == []
    assert case_dirs(cases_root) == []


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_a_leased_job_runs_in_its_worktree_and_its_result_names_the_repo(
    alice: Any,
    workspace: Any,
    checkout: Path,
    cases_root: Path,
    script: Script,
    tmp_path: Path,
    blob_dir: Path,
) -> None:
    # The real server: the case's repo.diff is uploaded before its result names it.
    spec = {"command": [*script(READER), "{repo.path}"], "repo": {"name": NAME, "ref": "working"}}
    run = paired_run(alice, spec=spec, capabilities=["python", f"repo:{NAME}"])

    async def go() -> bool:
        async with ObservedClient(server, run.token) as client:
            [leased] = await client.lease(capabilities=["python", f"repo:{NAME}"])
            session = session_over(client, repos={NAME: str(checkout)})
            return await jobs(session).handle(JobRun(leased.job, leased.lease))

    with blob_server(tmp_path, blob_dir) as server:
        assert asyncio.run(go())
    [row] = CaseResultRow.objects.filter(run_id=run.run_id)
    assert json.loads(row.output)["app"] == "print(2)\n"
    # The case changed nothing: its diff is empty, and named all the same.
    [diff] = row.artifacts.all()
    assert (diff.path, diff.size, diff.media_type) == ("repo.diff", 0, "text/x-diff")
    assert stored(blob_dir, run.workspace_id) == {diff.blob.sha256: b""}
    assert row.fingerprint["repo"] == {
        "name": NAME,
        "sha": git(checkout, "rev-parse", "HEAD"),
        "dirty": True,
        "base": "working",
    }
    logged = list(JobLogLine.objects.filter(run_id=run.run_id).values_list("line", flat=True))
    assert any(
        line.startswith("repo acme/app: its own worktree at HEAD plus the uncommitted changes")
        for line in logged
    ), logged
    assert worktree_paths(checkout) == []


def test_a_leased_job_of_a_repo_not_mapped_here_fails_naming_the_command(
    cases_root: Path, script: Script
) -> None:
    session = fake_session()
    assert handle(session, repo_job(script("print('never')")))
    (failed,) = fake_client(session).of("fail_job")
    assert failed["message"] == (
        "repo acme/app is not mapped on this machine: "
        "run `python -m runnercli repo add acme/app PATH`"
    )
    assert fake_client(session).of("submit_job_result") == []
