"""Field conditions end to end: long cases, sleeping laptops, a database that blips.

The real server, scheduler and runner CLI run as processes over the test database, with
short leases and the presence write interval shortened so that short idle timeouts are
legal. Each case's harness counts its own executions in a file, so "ran once" is read from
the machine that ran it, not from the server's record.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import sqlite3
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection

from accounts.services import api_key_create
from runners.models import JobAttempt, RunnerJob
from scorecards.blobs.models import Artifact, Blob, BlobUpload
from scorecards.services import dataset_create, harness_create
from tests.live import Proc, daphne, free_port, runner_cli, scheduler
from tests.runnercli.test_e2e import Api, LiveServer, gone, wait_file, wait_output

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LEASE_TTL_S = 3
# Presence is written at most this often: idle timeouts of a few seconds are then legal.
PRESENCE_WRITE_S = 1


def field_env(idle_timeout_s: int, **env: Any) -> dict[str, Any]:
    return {
        "EVERDICT_LEASE_TTL_S": LEASE_TTL_S,
        "EVERDICT_PRESENCE_WRITE_S": PRESENCE_WRITE_S,
        "EVERDICT_QUEUE_IDLE_TIMEOUT_S": idle_timeout_s,
        **env,
    }


@contextmanager
def served(
    tmp_path: Path, alice: Any, idle_timeout_s: int, port: int | None = None, **env: Any
) -> Iterator[tuple[Api, Proc]]:
    """The server and the scheduler, both with the field settings; the API as alice."""
    settings = field_env(idle_timeout_s, **env)
    with daphne(tmp_path, port=port, **settings) as server, scheduler(tmp_path, **settings) as s:
        yield Api(server, api_key_create(user=alice, name="field").key), s


# The harness every test uses: it appends its pid to a count file as it starts, then waits
# (a number of seconds, or for a file to appear — two minutes at most, so that a failed test
# leaves no case behind), then answers. Given a third path, it first writes a 1 MiB artifact
# (over `RAW_UPLOAD_MIN_BYTES`: it goes by `begin_uploads` and a raw `PUT`), then that file.
COUNTING = """
    import os, random, sys, time
    count, wait = sys.argv[1], sys.argv[2]
    with open(count, "a") as f:
        f.write(f"{os.getpid()}\\n")
    if wait.replace(".", "").isdigit():
        time.sleep(float(wait))
    else:
        given_up = time.monotonic() + 120
        while not os.path.exists(wait):
            if time.monotonic() > given_up:
                sys.exit("never told to finish")
            time.sleep(0.05)
    if len(sys.argv) > 3:
        os.makedirs("out", exist_ok=True)
        with open("out/big.bin", "wb") as f:
            f.write(random.Random(3).randbytes(1024 * 1024))
        with open(sys.argv[3], "w") as f:
            f.write("written")
    print("ok")
"""
ARTIFACT = random.Random(3).randbytes(1024 * 1024)


def counting_harness(
    user: Any, tmp_path: Path, name: str, wait: str, *args: str, **spec: Any
) -> Path:
    """A harness that counts its runs in `<name>.count` (`args`: the artifact's signal file,
    see COUNTING); returns that file."""
    script = tmp_path / f"{name}.py"
    script.write_text(textwrap.dedent(COUNTING))
    count = tmp_path / f"{name}.count"
    harness_create(
        user=user,
        workspace_slug="acme",
        name=name,
        spec={
            "command": [sys.executable, str(script), str(count), wait, *args],
            "timeout_s": 120,
            "capabilities": ["python"],
            **spec,
        },
    )
    return count


def cases(user: Any, name: str, keys: list[str], expected: str = "ok") -> None:
    dataset_create(
        user=user,
        workspace_slug="acme",
        name=name,
        cases=[{"key": key, "input": {}, "expected": expected} for key in keys],
    )


def runs_of(count: Path) -> list[int]:
    """The pids the harness wrote, one per execution."""
    return [int(line) for line in count.read_text().split()] if count.exists() else []


def start_runner(tmp_path: Path, name: str = "laptop", *args: str) -> Proc:
    return runner_cli(tmp_path, ["run", "--wait-ms", "2000", *args], name=name)


def only_job(run_id: int) -> RunnerJob:
    return RunnerJob.objects.get(run_id=run_id)


def attempts(run_id: int) -> list[JobAttempt]:
    return list(JobAttempt.objects.filter(job__run_id=run_id).order_by("epoch", "pk"))


# ---- the idle timeout runs off runner activity


def test_a_busy_one_slot_runner_keeps_its_queue_and_a_run_queued_behind_it_passes(
    workspace: Any, alice: Any, tmp_path: Path
) -> None:
    # One slot, eight cases of 2 s: the second run's cases wait 12 s, past the idle timeout.
    counts = counting_harness(alice, tmp_path, "two-seconds", "2")
    cases(alice, "six", [f"s{i}" for i in range(6)])
    cases(alice, "two", ["t0", "t1"])
    with served(tmp_path, alice, idle_timeout_s=8) as (api, _):
        runner_id = api.pair(tmp_path, "laptop", "laptop")
        runner = start_runner(tmp_path)
        try:
            first = api.start_run("two-seconds", "six", f"self:{runner_id}", concurrency=2)
            second = api.start_run("two-seconds", "two", "self:any", concurrency=2)
            done = [api.wait_run(first, timeout=90), api.wait_run(second, timeout=60)]
        finally:
            runner.stop(signal.SIGTERM)
    for run in done:
        assert run["status"] == "succeeded", run
        assert run["summary"]["error"] == 0, run["summary"]
    assert len(runs_of(counts)) == 8  # one slot, every case once


def test_with_the_runner_stopped_the_idle_timeout_fails_the_run_naming_the_runner(
    workspace: Any, alice: Any, tmp_path: Path
) -> None:
    counting_harness(alice, tmp_path, "three-seconds", "3")
    cases(alice, "two", ["a", "b"])
    with served(tmp_path, alice, idle_timeout_s=8) as (api, _):
        runner_id = api.pair(tmp_path, "laptop", "laptop")
        runner = start_runner(tmp_path)
        wait_output(runner, "connected to")
        assert runner.stop(signal.SIGTERM) == 0, runner.output()
        run = api.wait_run(api.start_run("three-seconds", "two", f"self:{runner_id}"), 60)
    assert run["status"] == "failed", run
    errors = {result["error"] for result in run["results"]}
    assert len(run["results"]) == 2
    assert all("laptop" in error and "offline" in error for error in errors), errors


# ---- the database unavailable while a case finishes


@contextmanager
def database_unavailable() -> Iterator[None]:
    """Refuse the test database to everyone: on PostgreSQL no connection is allowed and
    those open are ended; on SQLite another connection holds the write lock."""
    name = connection.settings_dict["NAME"]
    if connection.vendor == "sqlite":
        locker = sqlite3.connect(name, timeout=10, isolation_level=None)
        locker.execute("BEGIN EXCLUSIVE")
        try:
            yield
        finally:
            locker.execute("ROLLBACK")
            locker.close()
        return
    params = dict(connection.get_connection_params())
    params["dbname"] = "postgres"
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                [name],
            )
            yield
        finally:
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')
    connection.close()  # ours was ended with the others


def through_an_outage(
    tmp_path: Path, alice: Any, harness: str, go: Path, ended: Path | None = None, **env: Any
) -> tuple[dict[str, Any], int, str]:
    """A 1-case run of `harness` on a runner of its own, the database refused to everyone
    from just before the case is let finish (`go`) until 5 s later (and at least until
    `ended` is written, when given); the run once it ends, with every process still up, its
    id and the runner's output."""
    # The server gives up on the database at once (a held write lock, a pool without a
    # connection), so the case's calls really meet the outage rather than waiting it out.
    env = {"EVERDICT_SQLITE_BUSY_TIMEOUT_S": 1, "EVERDICT_DB_POOL_TIMEOUT_S": 1, **env}
    with served(tmp_path, alice, idle_timeout_s=60, **env) as (api, sched):
        runner_id = api.pair(tmp_path, "laptop", "laptop")
        runner = start_runner(tmp_path)
        try:
            run_id = api.start_run(harness, "one", f"self:{runner_id}")
            wait_file(tmp_path / f"{harness}.count")
            with database_unavailable():
                refused = time.monotonic()
                go.touch()  # the case finishes now, its calls meet the outage
                if ended is not None:
                    wait_file(ended)
                time.sleep(max(0.0, refused + 5 - time.monotonic()))
            run = api.wait_run(run_id, timeout=60)
            for proc in (api.server.proc, sched, runner):
                assert proc.popen.poll() is None, proc.output()[-3000:]
        finally:
            runner.stop(signal.SIGTERM)
    return run, run_id, runner.output()


def test_the_database_unavailable_for_5s_while_a_case_finishes_loses_nothing(
    workspace: Any, alice: Any, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    count = counting_harness(alice, tmp_path, "waits", str(go))
    cases(alice, "one", ["only"])
    run, run_id, output = through_an_outage(tmp_path, alice, "waits", go)
    assert run["status"] == "succeeded", (run, output[-3000:])
    assert run["results"][0]["verdict"] == "pass"
    assert len(runs_of(count)) == 1, output[-3000:]
    assert [a.status for a in attempts(run_id)] == ["succeeded"]
    assert "result not delivered yet" in output  # it met the outage, and waited


def test_an_artifact_uploaded_while_the_database_is_away_lands_once_with_its_result(
    workspace: Any, alice: Any, tmp_path: Path, blob_dir: Path
) -> None:
    go, ended = tmp_path / "go", tmp_path / "written"
    count = counting_harness(
        alice, tmp_path, "writes", str(go), str(ended), artifacts=["out/*.bin"]
    )
    cases(alice, "one", ["only"])
    storage = json.dumps({"location": str(blob_dir), "allow_overwrite": True})
    # Once the artifact is written the case ends, and its upload meets the outage.
    run, run_id, output = through_an_outage(
        tmp_path, alice, "writes", go, ended, EVERDICT_BLOB_STORAGE_OPTIONS=storage
    )
    assert run["status"] == "succeeded", (run, output[-3000:])
    assert len(runs_of(count)) == 1, output[-3000:]
    assert [a.status for a in attempts(run_id)] == ["succeeded"]
    [blob] = Blob.objects.filter(sha256=hashlib.sha256(ARTIFACT).hexdigest())
    assert (blob_dir / blob.key).read_bytes() == ARTIFACT
    [artifact] = Artifact.objects.filter(result__run_id=run_id)
    assert (artifact.path, artifact.blob_id) == ("out/big.bin", blob.pk)
    assert not BlobUpload.objects.exists()


# ---- a runner that sleeps past its lease


@pytest.mark.parametrize("max_attempts", [3, 1], ids=["attempts-left", "last-attempt"])
def test_a_runner_stopped_past_its_lease_mid_case_resumes_the_case_it_kept(
    workspace: Any, alice: Any, tmp_path: Path, max_attempts: int
) -> None:
    go = tmp_path / "go"
    count = counting_harness(alice, tmp_path, "waits", str(go))
    cases(alice, "one", ["only"])
    env = {"EVERDICT_MAX_ATTEMPTS": max_attempts}
    # The idle timeout is longer than the stop: a sleeping runner is not an absent one.
    with served(tmp_path, alice, idle_timeout_s=30, **env) as (api, _):
        runner_id = api.pair(tmp_path, "laptop", "laptop")
        runner = start_runner(tmp_path)
        try:
            run_id = api.start_run("waits", "one", f"self:{runner_id}")
            wait_file(count)
            (case_pid,) = runs_of(count)
            # The laptop sleeps: the runner and the case stop together, well past the lease.
            runner.signal_group(signal.SIGSTOP)
            os.killpg(case_pid, signal.SIGSTOP)
            deadline = time.monotonic() + 15
            while only_job(run_id).status == "leased":
                assert time.monotonic() < deadline, "the lease never lapsed"
                time.sleep(0.2)
            time.sleep(12 - LEASE_TTL_S)
            os.killpg(case_pid, signal.SIGCONT)
            runner.signal_group(signal.SIGCONT)
            wait_output(runner, "case resumed")
            go.touch()
            run = api.wait_run(run_id, timeout=60)
        finally:
            runner.signal_group(signal.SIGCONT)
            runner.stop(signal.SIGTERM)
    assert run["status"] == "succeeded", (run, runner.output()[-3000:])
    assert len(runs_of(count)) == 1
    (attempt,) = attempts(run_id)
    assert attempt.status == "succeeded"
    assert attempt.resumes >= 1 and attempt.gap_ms > 0
    assert "slept " in runner.output() and "1 case resumed" in runner.output()


def test_a_runner_that_wakes_to_find_its_case_taken_by_another_stops_it(
    workspace: Any, alice: Any, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    count = counting_harness(alice, tmp_path, "waits", str(go))
    cases(alice, "one", ["only"])
    with served(tmp_path, alice, idle_timeout_s=30) as (api, _):
        api.pair(tmp_path, "laptop", "laptop")
        desktop_id = api.pair(tmp_path, "desktop", "desktop")
        laptop = start_runner(tmp_path, "laptop")
        desktop: Proc | None = None
        try:
            run_id = api.start_run("waits", "one", "self:any")
            wait_file(count)
            (laptop_case,) = runs_of(count)
            laptop.signal_group(signal.SIGSTOP)
            os.killpg(laptop_case, signal.SIGSTOP)
            asleep = time.monotonic()
            desktop = start_runner(tmp_path, "desktop")
            while len(runs_of(count)) < 2:  # the desktop took the lapsed job and started it
                assert time.monotonic() < asleep + 30, desktop.output()
                time.sleep(0.1)
            time.sleep(max(0.0, asleep + 12 - time.monotonic()))
            os.killpg(laptop_case, signal.SIGCONT)
            laptop.signal_group(signal.SIGCONT)
            wait_output(laptop, "1 taken by another runner")
            deadline = time.monotonic() + 10
            while not gone(laptop_case):  # its copy of the case was stopped
                assert time.monotonic() < deadline
                time.sleep(0.1)
            go.touch()
            run = api.wait_run(run_id, timeout=60)
        finally:
            laptop.signal_group(signal.SIGCONT)
            laptop.stop(signal.SIGTERM)
            if desktop is not None:
                desktop.stop(signal.SIGTERM)
    assert run["status"] == "succeeded", run
    assert run["results"][0]["provenance"]["runner"] == f"{desktop_id}/desktop"
    assert "■ stopped: stale lease" in laptop.output()
    statuses = [a.status for a in attempts(run_id)]
    assert statuses[-1] == "succeeded" and statuses[0] in ("expired", "superseded"), statuses


# ---- kill -9 right after a case finished


def test_a_result_spooled_before_a_kill_9_lands_after_a_restart(
    workspace: Any, alice: Any, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    count = counting_harness(alice, tmp_path, "waits", str(go))
    cases(alice, "one", ["only"])
    port = free_port()
    spool = tmp_path / "laptop.spool"
    settings = field_env(60)
    api = Api(LiveServer(None, port), api_key_create(user=alice, name="field").key)  # type: ignore[arg-type]
    with scheduler(tmp_path, **settings):
        with daphne(tmp_path, port=port, **settings):
            runner_id = api.pair(tmp_path, "laptop", "laptop")
            runner = start_runner(tmp_path)
            run_id = api.start_run("waits", "one", f"self:{runner_id}")
            wait_file(count)
        # The server is gone when the case finishes: the result can only wait on disk.
        go.touch()
        deadline = time.monotonic() + 30
        while not list(spool.glob("*.json")):
            assert time.monotonic() < deadline, runner.output()
            time.sleep(0.05)
        runner.stop(signal.SIGKILL)
        (spooled,) = spool.glob("*.json")
        assert oct(spooled.stat().st_mode & 0o777) == "0o600"
        assert oct(spool.stat().st_mode & 0o777) == "0o700"
        with daphne(tmp_path, port=port, **settings):
            again = start_runner(tmp_path, "laptop")
            try:
                run = api.wait_run(run_id, timeout=60)
            finally:
                again.stop(signal.SIGTERM)
    assert run["status"] == "succeeded", (run, again.output())
    assert run["results"][0]["verdict"] == "pass"
    assert len(runs_of(count)) == 1
    assert "sending 1 result(s) kept from an earlier run" in again.output()
    assert not list(spool.glob("*.json"))
    assert [a.status for a in attempts(run_id)] == ["succeeded"]


# ---- plan limits, big inputs, many slots


RATE_LIMITED_ONCE = """
    import json, os, sys, time
    count = sys.argv[1]
    runs = open(count).read().split() if os.path.exists(count) else []
    with open(count, "a") as f:
        f.write(f"{time.time()}\\n")
    if not runs:
        print("usage limit reached, retry after 2s", file=sys.stderr)
        sys.exit(75)
    print("ok")
"""


def test_a_rate_limited_case_pauses_the_runner_and_is_retried_without_spending_an_attempt(
    workspace: Any, alice: Any, tmp_path: Path
) -> None:
    script = tmp_path / "limited.py"
    script.write_text(textwrap.dedent(RATE_LIMITED_ONCE))
    count = tmp_path / "limited.count"
    harness_create(
        user=alice,
        workspace_slug="acme",
        name="limited",
        spec={
            "command": [sys.executable, str(script), str(count)],
            "timeout_s": 60,
            "capabilities": ["python"],
            "retry_on": {
                "exit_codes": [75],
                "stderr_regex": r"retry after (?P<retry_after>\d+)s",
            },
        },
    )
    cases(alice, "one", ["only"])
    # One attempt only: a hand-back that spent it would fail the case.
    with served(tmp_path, alice, idle_timeout_s=30, EVERDICT_MAX_ATTEMPTS=1) as (api, _):
        runner_id = api.pair(tmp_path, "laptop", "laptop")
        runner = start_runner(tmp_path)
        try:
            run = api.wait_run(api.start_run("limited", "one", f"self:{runner_id}"), 60)
        finally:
            runner.stop(signal.SIGTERM)
    assert run["status"] == "succeeded", (run, runner.output())
    first, second = (float(at) for at in count.read_text().split())
    assert second - first >= 2  # it waited as the tool said
    output = runner.output()
    assert "paused: rate-limited until " in output
    assert "⏸ rate-limited (exit code 75)" in output
    job = only_job(run["id"])
    assert [a.status for a in attempts(run["id"])][-1] == "succeeded"
    assert job.status == "succeeded"


BIG_INPUT = """
    import json, os, sys
    case = json.load(open(sys.argv[1]))
    print(json.dumps({"size": len(case["input"]["blob"]), "env": "EVERDICT_CASE" in os.environ}))
"""


def test_a_300_kb_case_input_runs_through_the_case_file(
    workspace: Any, alice: Any, tmp_path: Path
) -> None:
    script = tmp_path / "big.py"
    script.write_text(textwrap.dedent(BIG_INPUT))
    harness_create(
        user=alice,
        workspace_slug="acme",
        name="big",
        spec={
            "command": [sys.executable, str(script), "{case.file}"],
            "timeout_s": 60,
            "capabilities": ["python"],
            "output": "json",
            "grader": {"type": "json_equals", "field": "size"},
        },
    )
    dataset_create(
        user=alice,
        workspace_slug="acme",
        name="big",
        cases=[{"key": "big", "input": {"blob": "x" * 300_000}, "expected": 300_000}],
    )
    with served(tmp_path, alice, idle_timeout_s=30) as (api, _):
        runner_id = api.pair(tmp_path, "laptop", "laptop")
        runner = start_runner(tmp_path)
        try:
            run = api.wait_run(api.start_run("big", "big", f"self:{runner_id}"), 60)
        finally:
            runner.stop(signal.SIGTERM)
    assert run["status"] == "succeeded", (run, runner.output())
    assert json.loads(run["results"][0]["output"]) == {"size": 300_000, "env": False}


def test_a_runner_with_max_concurrent_48_leases_and_runs(
    workspace: Any, alice: Any, tmp_path: Path
) -> None:
    count = counting_harness(alice, tmp_path, "quick", "0")
    cases(alice, "three", ["a", "b", "c"])
    with served(tmp_path, alice, idle_timeout_s=30) as (api, _):
        runner_id = api.pair(tmp_path, "laptop", "laptop")
        runner = start_runner(tmp_path, "laptop", "--max-concurrent", "48")
        try:
            run = api.wait_run(api.start_run("quick", "three", f"self:{runner_id}", 3), 60)
        finally:
            runner.stop(signal.SIGTERM)
    assert run["status"] == "succeeded", (run, runner.output())
    assert len(runs_of(count)) == 3
    assert "lease refused" not in runner.output()
