"""Field conditions of a verified case, end to end: the real server, scheduler and runner CLI
as processes over the test database, short leases, a real git checkout of the project with a
bug. The agent and the verifier each count their executions in a file; the verifier waits to
be told to finish, so the laptop sleeps, or the database is refused, while it runs or while its
result is delivered. However it goes, the member's checkout is untouched and no worktree is
left.
"""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from scorecards.models import CaseResult
from tests.runnercli.gitrepos import git, snapshot, worktree_paths
from tests.runnercli.test_e2e import wait_file, wait_output
from tests.runnercli.test_repo_e2e import NAME, case_dirs, map_and_pair, start_runner
from tests.runnercli.verifyrepo import counted_harness, make_project
from tests.test_runner_cli_in_the_field import (
    attempts,
    database_unavailable,
    only_job,
    runs_of,
    served,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# Counts itself, then passes once told to (two minutes at most: a failed test leaves nothing).
WAITING_VERIFIER = """
import os, sys, time
count, go = sys.argv[1], sys.argv[2]
with open(count, "a") as f:
    f.write(f"{os.getpid()}\\n")
given_up = time.monotonic() + 120
while not os.path.exists(go):
    if time.monotonic() > given_up:
        sys.exit("never told to finish")
    time.sleep(0.05)
"""


def verified(user: Any, tmp_path: Path) -> tuple[Path, Path, Path]:
    """The harness and its one case; return the agent's and the verifier's count files and
    the file that lets the verifier finish."""
    return counted_harness(
        user, tmp_path, name="verified", repo=NAME, verifier_source=WAITING_VERIFIER, flag="go"
    )


def left_as_it_was(checkout: Path, before: Any, tmp_path: Path) -> None:
    assert snapshot(checkout) == before
    assert git(checkout, "status", "--porcelain") == ""
    assert worktree_paths(checkout) == []
    assert case_dirs(tmp_path) == []


def test_a_runner_stopped_past_its_lease_during_the_verifier_resumes_it_not_reruns_it(
    workspace: Any, alice: Any, tmp_path: Path
) -> None:
    checkout = tmp_path / "member" / "app"
    make_project(checkout)
    before = snapshot(checkout)
    agents, verifies, go = verified(alice, tmp_path)
    with served(tmp_path, alice, idle_timeout_s=30) as (api, _):
        runner_id = map_and_pair(api, tmp_path, checkout)
        runner = start_runner(tmp_path, "laptop")
        try:
            run_id = api.start_run("verified", "one", f"self:{runner_id}")
            wait_file(verifies)
            (verifier_pid,) = runs_of(verifies)
            # The laptop sleeps during the verifier: the runner and the verifier stop together,
            # well past the lease.
            group = os.getpgid(verifier_pid)
            runner.signal_group(signal.SIGSTOP)
            os.killpg(group, signal.SIGSTOP)
            deadline = time.monotonic() + 15
            while only_job(run_id).status == "leased":
                assert time.monotonic() < deadline, "the lease never lapsed"
                time.sleep(0.2)
            time.sleep(1)  # past it, and nobody else took the case
            os.killpg(group, signal.SIGCONT)
            runner.signal_group(signal.SIGCONT)
            wait_output(runner, "case resumed")
            go.touch()
            run = api.wait_run(run_id, timeout=60)
        finally:
            runner.signal_group(signal.SIGCONT)
            assert runner.stop(signal.SIGTERM) == 0, runner.output()[-3000:]
    assert run["status"] == "succeeded", (run, runner.output()[-3000:])
    assert (run["results"][0]["verdict"], run["results"][0]["score"]) == ("pass", 1.0)
    assert len(runs_of(agents)) == 1 and len(runs_of(verifies)) == 1
    (attempt,) = attempts(run_id)
    assert attempt.status == "succeeded"
    assert attempt.resumes >= 1 and attempt.gap_ms > 0
    left_as_it_was(checkout, before, tmp_path)


def test_the_database_refused_for_5s_while_a_verified_result_is_delivered_loses_nothing(
    workspace: Any, alice: Any, tmp_path: Path
) -> None:
    checkout = tmp_path / "member" / "app"
    make_project(checkout)
    before = snapshot(checkout)
    agents, verifies, go = verified(alice, tmp_path)
    # The server gives up on the database at once, so the result really meets the outage.
    env = {"EVERDICT_SQLITE_BUSY_TIMEOUT_S": 1, "EVERDICT_DB_POOL_TIMEOUT_S": 1}
    with served(tmp_path, alice, idle_timeout_s=60, **env) as (api, scheduler):
        runner_id = map_and_pair(api, tmp_path, checkout)
        runner = start_runner(tmp_path, "laptop")
        try:
            run_id = api.start_run("verified", "one", f"self:{runner_id}")
            wait_file(verifies)
            with database_unavailable():
                go.touch()  # the verifier passes now, its result meets the outage
                time.sleep(5)
            refused_until = datetime.now(UTC)
            run = api.wait_run(run_id, timeout=60)
            for proc in (api.server.proc, scheduler, runner):
                assert proc.popen.poll() is None, proc.output()[-3000:]
        finally:
            assert runner.stop(signal.SIGTERM) == 0, runner.output()[-3000:]
    assert run["status"] == "succeeded", (run, runner.output()[-3000:])
    assert (run["results"][0]["verdict"], run["results"][0]["score"]) == ("pass", 1.0)
    assert run["results"][0]["phases"]["verify_s"] > 0
    assert len(runs_of(agents)) == 1 and len(runs_of(verifies)) == 1
    assert [a.status for a in attempts(run_id)] == ["succeeded"]
    # It met the outage: the verified result was stored once the database was back.
    (stored,) = CaseResult.objects.filter(run_id=run_id)
    assert stored.created_at >= refused_until, runner.output()[-3000:]
    left_as_it_was(checkout, before, tmp_path)
