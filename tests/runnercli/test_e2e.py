"""End to end: daphne, the scheduler and `python -m runnercli` as real processes.

A member pairs from the REST token, the runner pulls and runs cases locally, and what it
reports is scored by the server. Only the HTTP API and the CLI are used, as a member would;
the database is read directly only to check the attempt ledger.
"""

from __future__ import annotations

import json
import signal
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from accounts.services import api_key_create
from runnercli.protocol import PROTOCOL_VERSION
from runners.models import JobAttempt, RunnerJob
from scorecards.models import CaseResult
from scorecards.services import dataset_create, harness_create
from tests.live import (
    ROOT,
    LiveServer,
    Proc,
    daphne,
    free_port,
    runner_cli,
    scheduler,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LEASE_TTL_S = 3
# This checkout is installed editable (`make install`): it updates by pulling and installing.
UPDATE_COMMAND = f"cd {ROOT} && git pull && make install"
FINISHED = {"succeeded", "failed", "canceled"}


@dataclass
class Api:
    server: LiveServer
    key: str

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            self.server.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as reply:
                raw = reply.read()
                return reply.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            return exc.code, json.loads(raw) if raw else None

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, reply = self.call(method, path, body)
        assert status < 300, (status, reply)
        return reply

    def pair(self, tmp_path: Path, name: str, label: str) -> int:
        """Pair through the REST API, then `python -m runnercli pair` with the token."""
        paired = self.ok("POST", "/api/runners", {"label": label, "capabilities": ["python"]})
        proc = runner_cli(
            tmp_path,
            ["pair", "--server", self.server.url, "--token", paired["token"]],
            name=name,
        )
        assert proc.popen.wait(30) == 0, proc.output()
        assert f"as runner {paired['id']} “{label}” of alice" in proc.output()
        return int(paired["id"])

    def start_run(self, harness: str, dataset: str, runtime: str, concurrency: int = 1) -> int:
        run = self.ok(
            "POST",
            "/api/workspaces/acme/runs",
            {
                "harness": harness,
                "dataset": dataset,
                "runtime": runtime,
                "concurrency": concurrency,
            },
        )
        return int(run["id"])

    def wait_run(self, run_id: int, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run = self.ok("GET", f"/api/runs/{run_id}")
            if run["status"] in FINISHED:
                return run
            time.sleep(0.2)
        raise AssertionError(f"run {run_id} did not finish: {run}")

    def logs(self, run_id: int) -> list[dict[str, Any]]:
        return list(self.ok("GET", f"/api/runs/{run_id}/logs"))


@pytest.fixture
def api(workspace: Any, alice: Any, tmp_path: Path) -> Iterator[Api]:
    env = {"EVERDICT_LEASE_TTL_S": LEASE_TTL_S, "EVERDICT_QUEUE_IDLE_TIMEOUT_S": 120}
    with daphne(tmp_path, **env) as server, scheduler(tmp_path, **env):
        yield Api(server, api_key_create(user=alice, name="e2e").key)


def harness(
    user: Any, tmp_path: Path, name: str, source: str, args: list[str], **spec: Any
) -> None:
    """A harness that is a small Python script on this machine."""
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
            **spec,
        },
    )


def dataset(user: Any, name: str, cases: list[dict[str, Any]]) -> None:
    dataset_create(user=user, workspace_slug="acme", name=name, cases=cases)


def start_runner(tmp_path: Path, name: str, *args: str) -> Proc:
    return runner_cli(tmp_path, ["run", "--wait-ms", "2000", *args], name=name)


def wait_output(proc: Proc, text: str, timeout: float = 30, *, times: int = 1) -> None:
    """Wait until the runner's output holds `text` (`times` times in all)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.output().count(text) >= times:
            return
        assert proc.popen.poll() is None, proc.output()
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not in runner output:\n{proc.output()}")


def wait_file(path: Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} was never written")


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


ADDER = """
    import json, os, sys
    case = json.loads(os.environ["EVERDICT_CASE"])
    a, b = int(sys.argv[1]), int(sys.argv[2])
    print(f"adding {a} and {b} for {case['key']}", file=sys.stderr)
    print(a + b)
"""


def test_a_paired_runner_runs_a_five_case_run_scored_by_the_server(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    harness(alice, tmp_path, "adder", ADDER, ["{input.a}", "{input.b}"])
    sums = [(1, 1, "2"), (2, 3, "5"), (10, 5, "15"), (4, 4, "9"), (7, 0, "8")]
    dataset(
        alice,
        "sums",
        [
            {"key": f"c{i}", "input": {"a": a, "b": b}, "expected": e}
            for i, (a, b, e) in enumerate(sums)
        ],
    )
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = start_runner(tmp_path, "laptop")
    try:
        run_id = api.start_run("adder", "sums", f"self:{runner_id}")
        run = api.wait_run(run_id)
    finally:
        assert runner.stop(signal.SIGTERM) == 0, runner.output()

    assert run["summary"]["pass"] == 3
    assert run["summary"]["fail"] == 2  # c3 and c4 expect a wrong sum, by design
    verdicts = {r["case"]: r["verdict"] for r in run["results"]}
    assert verdicts == {"c0": "pass", "c1": "pass", "c2": "pass", "c3": "fail", "c4": "fail"}
    assert run["status"] == "succeeded"
    for result in run["results"]:
        assert result["provenance"]["ran_on"] == "self-hosted"
        assert result["provenance"]["runner"] == f"{runner_id}/laptop"
        assert result["provenance"]["by"] == "alice"
    lines = [entry["line"] for entry in api.logs(run_id)]
    assert "▶ started adder v1 case c1" in lines
    assert "adding 2 and 3 for c1" in lines
    assert sum(line.startswith("✓ completed exit 0 in ") for line in lines) == 5
    output = runner.output()
    assert "harness adder v1 will run:" in output  # shown before it first ran
    assert "status: running 1 job" in output


def test_three_cases_overlap_with_max_concurrent_3(api: Api, alice: Any, tmp_path: Path) -> None:
    harness(
        alice,
        tmp_path,
        "sleeper",
        """
        import json, time
        start = time.time()
        time.sleep(2)
        print(json.dumps({"start": start, "end": time.time()}))
        """,
        [],
        grader={"type": "exit_code"},
    )
    dataset(alice, "three", [{"key": f"s{i}", "input": {}, "expected": 0} for i in range(3)])
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = start_runner(tmp_path, "laptop", "--max-concurrent", "3")
    try:
        run = api.wait_run(api.start_run("sleeper", "three", f"self:{runner_id}", concurrency=3))
    finally:
        runner.stop(signal.SIGTERM)
    assert run["status"] == "succeeded", run
    spans = [json.loads(r["output"]) for r in run["results"]]
    assert len(spans) == 3
    assert max(s["start"] for s in spans) < min(s["end"] for s in spans), spans


TOGETHER = """
    import sys, time
    time.sleep(max(0.0, float(sys.argv[1]) - time.time()))
    print("ok")
"""


def test_cases_finishing_together_are_reported_in_fewer_calls_and_scored_once(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = start_runner(tmp_path, "laptop", "--max-concurrent", "4")
    try:
        wait_output(runner, "connected to")
        # Every case sleeps until one shared instant, well after the first four are leased.
        harness(alice, tmp_path, "together", TOGETHER, [f"{time.time() + 3:.3f}"])
        dataset(alice, "eight", [{"key": f"t{i}", "input": {}, "expected": "ok"} for i in range(8)])
        run_id = api.start_run("together", "eight", f"self:{runner_id}", concurrency=8)
        run = api.wait_run(run_id)
    finally:
        assert runner.stop(signal.SIGTERM) == 0, runner.output()
    assert run["status"] == "succeeded", run
    scored = CaseResult.objects.filter(run_id=run_id).values_list("case__key", "verdict")
    assert sorted(scored) == [(f"t{i}", "pass") for i in range(8)]
    attempts = JobAttempt.objects.filter(job__run_id=run_id).values_list("status", flat=True)
    assert list(attempts) == ["succeeded"] * 8
    # The server settles all the jobs of one call at one instant.
    calls = Counter(RunnerJob.objects.filter(run_id=run_id).values_list("finished_at", flat=True))
    assert max(calls.values()) >= 2, f"every result went in a call of its own: {calls}"
    assert runner.output().count("✓ completed exit 0 in ") == 8


def test_a_killed_runners_job_requeues_and_a_second_runner_finishes_it(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    harness(
        alice,
        tmp_path,
        "slow",
        """
        import sys, time
        print("working", file=sys.stderr)
        time.sleep(4)
        print("ok")
        """,
        [],
    )
    dataset(alice, "one", [{"key": "only", "input": {}, "expected": "ok"}])
    first_id = api.pair(tmp_path, "first", "first")
    second_id = api.pair(tmp_path, "second", "second")
    first = start_runner(tmp_path, "first")
    try:
        run_id = api.start_run("slow", "one", "self:any")
        wait_output(first, "▶ started slow v1 case only")
        first.stop(signal.SIGKILL)
        second = start_runner(tmp_path, "second")
        try:
            run = api.wait_run(run_id, timeout=60)
        finally:
            second.stop(signal.SIGTERM)
    finally:
        first.stop(signal.SIGKILL)
    assert run["status"] == "succeeded", run
    assert run["results"][0]["verdict"] == "pass"
    assert run["results"][0]["provenance"]["runner"] == f"{second_id}/second"
    attempts = list(JobAttempt.objects.filter(job__run_id=run_id).order_by("epoch"))
    assert [(a.runner_id, a.status) for a in attempts] == [
        (first_id, "expired"),
        (second_id, "succeeded"),
    ]


def test_canceling_a_run_ends_the_cases_process_tree_within_a_heartbeat(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    pids_file = tmp_path / "pids.txt"
    harness(
        alice,
        tmp_path,
        "sleepy",
        """
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        with open(sys.argv[1], "w") as f:
            f.write(f"{os.getpid()} {child.pid}")
        time.sleep(120)
        """,
        [str(pids_file)],
    )
    dataset(alice, "nap", [{"key": "nap", "input": {}, "expected": "never"}])
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = start_runner(tmp_path, "laptop")
    try:
        run_id = api.start_run("sleepy", "nap", f"self:{runner_id}")
        pids = [int(pid) for pid in wait_file(pids_file).split()]
        assert not any(gone(pid) for pid in pids)
        api.ok("POST", f"/api/runs/{run_id}/cancel")
        canceled_at = time.monotonic()
        heartbeat_s = LEASE_TTL_S / 3
        while not all(gone(pid) for pid in pids):
            assert time.monotonic() - canceled_at < heartbeat_s + 2.0, "the case still runs"
            time.sleep(0.05)
        wait_output(runner, "■ stopped: canceled")
        assert api.wait_run(run_id)["status"] == "canceled"
        assert runner.popen.poll() is None  # the runner carries on
    finally:
        runner.stop(signal.SIGTERM)


def test_a_harness_not_on_the_allow_list_is_refused_and_never_executed(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "marker.txt"
    harness(
        alice,
        tmp_path,
        "writer",
        "import sys; open(sys.argv[1], 'w').write('ran')",
        [str(marker)],
    )
    dataset(alice, "touch", [{"key": "t", "input": {}, "expected": ""}])
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = start_runner(tmp_path, "laptop", "--allow", "adder", "--allow", "judge@2")
    try:
        run = api.wait_run(api.start_run("writer", "touch", f"self:{runner_id}"))
        wait_output(runner, "✗ refused: harness writer v1 is not allowed on this runner")
    finally:
        runner.stop(signal.SIGTERM)
    assert run["status"] == "failed"
    result = run["results"][0]
    assert result["verdict"] == "error"
    assert "not allowed on this runner (allowed: adder, judge@2)" in result["error"]
    assert not marker.exists()
    assert "will run" not in runner.output()


def test_a_revoked_runner_exits_3_asking_to_pair_again(api: Api, tmp_path: Path) -> None:
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = start_runner(tmp_path, "laptop")
    try:
        wait_output(runner, "connected to")
        api.ok("DELETE", f"/api/runners/{runner_id}")
        assert runner.popen.wait(20) == 3
        assert "this runner was revoked — pair again" in runner.output()
    finally:
        runner.stop(signal.SIGKILL)


def test_once_runs_one_job_and_exits_0(api: Api, alice: Any, tmp_path: Path) -> None:
    harness(alice, tmp_path, "adder", ADDER, ["{input.a}", "{input.b}"])
    dataset(
        alice,
        "pair",
        [{"key": f"p{i}", "input": {"a": i, "b": i}, "expected": str(2 * i)} for i in range(2)],
    )
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    run_id = api.start_run("adder", "pair", f"self:{runner_id}")
    runner = start_runner(tmp_path, "laptop", "--once")
    try:
        assert runner.popen.wait(30) == 0, runner.output()
    finally:
        runner.stop(signal.SIGKILL)
    run = api.ok("GET", f"/api/runs/{run_id}")
    assert run["summary"]["pass"] == 1
    assert run["status"] == "running"


def test_doctor_reports_the_runner_and_an_outdated_runner_is_told_to_upgrade(
    workspace: Any, alice: Any, tmp_path: Path
) -> None:
    with daphne(tmp_path, EVERDICT_MIN_RUNNER_PROTOCOL=PROTOCOL_VERSION + 1) as server:
        api = Api(server, api_key_create(user=alice, name="e2e").key)
        paired = api.ok("POST", "/api/runners", {"label": "old", "capabilities": ["python"]})
        args = ["--server", server.url, "--token", paired["token"]]
        doctor = runner_cli(tmp_path, ["doctor", *args], name="doctor")
        assert doctor.popen.wait(30) == 4
        runner = runner_cli(tmp_path, ["run", *args], name="old")
        assert runner.popen.wait(30) == 4
        assert f"upgrade it with `{UPDATE_COMMAND}`" in runner.output()
    with daphne(tmp_path) as server:
        doctor = runner_cli(tmp_path, ["doctor", *args[:1], server.url, *args[2:]], name="ok")
        assert doctor.popen.wait(30) == 0, doctor.output()
        assert f"✓ token valid: runner {paired['id']} “old” of alice" in doctor.output()


SLEEP_ONCE = """
    import os, subprocess, sys, time
    marker = sys.argv[1]
    if not os.path.exists(marker):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        with open(marker, "w") as f:
            f.write(f"{os.getpid()} {child.pid}")
        time.sleep(float(sys.argv[2]))
    print("ok")
"""


def nap_runner(api: Api, alice: Any, tmp_path: Path, seconds: float) -> tuple[Path, int, Proc]:
    """A `nap` harness (SLEEP_ONCE for `seconds`) and dataset, and a paired runner started:
    the marker file its case writes, the runner's id, the runner."""
    marker = tmp_path / "pids.txt"
    harness(alice, tmp_path, "nap", SLEEP_ONCE, [str(marker), str(seconds)])
    dataset(alice, "nap", [{"key": "n", "input": {}, "expected": "ok"}])
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    return marker, runner_id, start_runner(tmp_path, "laptop")


def test_the_first_signal_finishes_the_running_case_then_exits_0(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    marker, runner_id, runner = nap_runner(api, alice, tmp_path, 2)
    try:
        run_id = api.start_run("nap", "nap", f"self:{runner_id}")
        wait_file(marker)
        runner.popen.send_signal(signal.SIGTERM)
        assert runner.popen.wait(30) == 0, runner.output()
    finally:
        runner.stop(signal.SIGKILL)
    assert "stopping: finishing 1 running case(s)" in runner.output()
    run = api.ok("GET", f"/api/runs/{run_id}")
    assert run["status"] == "succeeded", run
    assert run["results"][0]["verdict"] == "pass"


def test_sigusr1_writes_what_the_runner_waits_on_and_a_stop_that_outlasts_its_grace_shows_it(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    marker, runner_id, runner = nap_runner(api, alice, tmp_path, 60)
    try:
        wait_output(runner, "connected to")
        # Idle: its leaser waits on the long-poll; the dump leaves it running. (Asked again
        # while the leaser has yet to make its first call, a moment after the connection.)
        for dumps in range(1, 6):
            runner.popen.send_signal(signal.SIGUSR1)
            wait_output(runner, "— end —", times=dumps)
            idle = runner.output()
            if "RunnerClient.lease_job" in idle.split("waits on")[-1]:
                break
            time.sleep(0.2)
        api.start_run("nap", "nap", f"self:{runner_id}")
        wait_file(marker)
        # Draining a case of a minute, it outlasts a grace of a second: before it is killed,
        # it says what it waits on.
        code = runner.stop(signal.SIGTERM, grace_s=1)
    finally:
        runner.stop(signal.SIGKILL)
    assert "waits on" in idle and "task " in idle, idle
    assert "Leaser._lease" in idle and "RunnerClient.lease_job" in idle, idle
    assert code == -signal.SIGKILL, runner.output()
    stuck = runner.output()[len(idle) :]
    assert "stopping: finishing 1 running case(s)" in stuck
    # The leaser waits for the case's task, and that task for its process.
    chain = stuck[stuck.index("waits on") :]
    for frame in ("Leaser.run", "Jobs.handle", "Pipeline.run", "Execute."):
        assert frame in chain, chain


def test_a_second_signal_hands_the_running_case_back_for_another_attempt(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    marker, runner_id, runner = nap_runner(api, alice, tmp_path, 120)
    try:
        run_id = api.start_run("nap", "nap", f"self:{runner_id}")
        pids = [int(pid) for pid in wait_file(marker).split()]
        runner.popen.send_signal(signal.SIGTERM)
        wait_output(runner, "signal again to hand them back")
        runner.popen.send_signal(signal.SIGTERM)
        assert runner.popen.wait(15) == 0, runner.output()
    finally:
        runner.stop(signal.SIGKILL)
    assert all(gone(pid) for pid in pids)
    attempt = JobAttempt.objects.get(job__run_id=run_id)
    # Handed back without spending an attempt (`release_job`).
    assert (attempt.status, attempt.reason) == (
        "superseded",
        "released by its runner: the runner was stopped by its owner",
    )
    assert attempt.job.status == "queued"  # requeued at once, not after the lease TTL
    assert attempt.job.attempts == 0

    assert f"run {run_id} case n: ■ handed back" in runner.output()

    again = runner_cli(
        tmp_path,
        ["run", "--wait-ms", "2000"],
        name="again",
        EVERDICT_RUNNER_CONFIG=tmp_path / "laptop.json",
    )
    try:
        run = api.wait_run(run_id)
    finally:
        again.stop(signal.SIGTERM)
    assert run["status"] == "succeeded", run


def daphne_on(tmp_path: Path, port: int) -> AbstractContextManager[LiveServer]:
    """The server on a port of the test's choosing, so a restart comes back on it."""
    return daphne(tmp_path, port=port, EVERDICT_LEASE_TTL_S=LEASE_TTL_S)


def test_the_runner_rides_out_a_server_restart(workspace: Any, alice: Any, tmp_path: Path) -> None:
    harness(alice, tmp_path, "adder", ADDER, ["{input.a}", "{input.b}"])
    dataset(alice, "one", [{"key": "x", "input": {"a": 2, "b": 2}, "expected": "4"}])
    port = free_port()
    api = Api(LiveServer(None, port), api_key_create(user=alice, name="e2e").key)  # type: ignore[arg-type]
    with daphne_on(tmp_path, port):
        runner_id = api.pair(tmp_path, "laptop", "laptop")
        runner = start_runner(tmp_path, "laptop")
        wait_output(runner, "connected to")
    try:
        wait_output(runner, "cannot reach server")
        with daphne_on(tmp_path, port), scheduler(tmp_path):
            run = api.wait_run(api.start_run("adder", "one", f"self:{runner_id}"), timeout=60)
            assert run["status"] == "succeeded", run
            assert runner.popen.poll() is None
    finally:
        runner.stop(signal.SIGTERM)
    assert "retrying in" in runner.output()
