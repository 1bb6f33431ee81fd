"""End to end, the runner on a laptop: daphne, the scheduler and `python -m runnercli`.

Awake while it works (observed through the runner's own report, `status`: these machines
have no system bus, so a stand-in `systemd-inhibit` holds the "lock"), paused on battery (a
faked power-supply directory), drained by `drain`, a status on the roster that is current,
updates that say how.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from django.test import Client

from accounts.services import api_key_create
from runnercli.cli import cli
from runnercli.laptop.pidfile import process_start
from runnercli.protocol import PROTOCOL_VERSION
from runnercli.slots import MAX_CONCURRENT_TYPE, auto_concurrency
from runners.models import JobStatus, Runner, RunnerJob
from tests.live import ParkedPolls, daphne, metric, runner_cli, scheduler
from tests.runnercli.test_e2e import (
    LEASE_TTL_S,
    UPDATE_COMMAND,
    Api,
    dataset,
    harness,
    start_runner,
    wait_file,
    wait_output,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def api(workspace: Any, alice: Any, tmp_path: Path) -> Iterator[Api]:
    env = {"EVERDICT_LEASE_TTL_S": LEASE_TTL_S, "EVERDICT_QUEUE_IDLE_TIMEOUT_S": 120}
    with daphne(tmp_path, **env) as server, scheduler(tmp_path, **env):
        yield Api(server, api_key_create(user=alice, name="e2e").key)


# The case waits for a file the test writes: it runs exactly as long as the test needs.
WAIT_FOR = """
    import os, sys, time
    started, release = sys.argv[1], sys.argv[2]
    open(started + "." + str(os.getpid()), "w").close()
    while not os.path.exists(release):
        time.sleep(0.05)
    print("ok")
"""


def fake_inhibitor(tmp_path: Path) -> str:
    """A `systemd-inhibit` that holds nothing but lives as long as its command (`cat`)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "systemd-inhibit"
    script.write_text('#!/bin/sh\nfor last; do :; done\nexec "$last"\n')
    script.chmod(0o755)
    return f"{bin_dir}:/usr/bin:/bin"


def power_supply(root: Path, *, on_ac: bool) -> Path:
    """A /sys/class/power_supply with a battery and a mains adapter."""
    (root / "BAT0").mkdir(parents=True, exist_ok=True)
    (root / "AC").mkdir(exist_ok=True)
    (root / "BAT0" / "type").write_text("Battery\n")
    (root / "BAT0" / "capacity").write_text("80\n")
    (root / "BAT0" / "status").write_text("Charging\n" if on_ac else "Discharging\n")
    (root / "AC" / "type").write_text("Mains\n")
    (root / "AC" / "online").write_text("1\n" if on_ac else "0\n")
    return root


def started_cases(tmp_path: Path) -> list[Path]:
    return sorted(tmp_path.glob("started.*"))


def wait_for(what: Any, timeout: float = 20, step: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := what():
            return found
        time.sleep(step)
    raise AssertionError(f"not within {timeout}s: {what}")


def beside(tmp_path: Path, name: str, args: list[str]) -> Any:
    """A command on the config of runner `name`, with a log of its own."""
    config = str(tmp_path / f"{name}.json")
    log = f"{args[0]}-{time.monotonic_ns()}"
    return runner_cli(tmp_path, args, name=log, EVERDICT_RUNNER_CONFIG=config)


def page(api: Api, user: Any, path: str) -> str:
    """A page as `user` sees it, over HTTP from the live server."""
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    request = urllib.request.Request(api.server.url + path, headers={"Cookie": cookie})
    with urllib.request.urlopen(request, timeout=30) as reply:
        return str(reply.read().decode())


# How long a paused runner is watched to lease nothing: a runner that leases does it within
# milliseconds of a call (the job is queued and claimable), and one on AC calls at once.
PAUSED_WATCH_S = 2.0


def nothing_leased_while_paused(run_id: int) -> None:
    """The run's job stays queued, with no attempt, while the runner is paused: watched on
    the server (the truth a lease would change), not by the absence of a case's file."""
    job = RunnerJob.objects.get(run_id=run_id)
    deadline = time.monotonic() + PAUSED_WATCH_S
    while time.monotonic() < deadline:
        job.refresh_from_db()
        assert job.status == JobStatus.QUEUED and not job.attempt_set.exists(), job.status
        time.sleep(0.1)


def runner_status(tmp_path: Path, name: str) -> str:
    proc = beside(tmp_path, name, ["status"])
    proc.popen.wait(30)
    return proc.output()


def roster_status(api: Api, runner_id: int) -> str:
    runners = api.ok("GET", "/api/runners")
    return next(r["status"] for r in runners if r["id"] == runner_id)


# The stand-in inhibitor writes its pid, then becomes the runner's `cat` (same pid): it
# lives exactly as long as the runner holds the pipe, as the real one's lock would.
RECORDING_INHIBITOR = '#!/bin/sh\necho $$ >> "{record}"\nfor last; do :; done\nexec "$last"\n'

# The case looks at the inhibitor itself: alive when it starts, alive when it ends.
LOOKS_AT_INHIBITOR = """
    import os, sys, time
    record, seen, release = sys.argv[1], sys.argv[2], sys.argv[3]

    def inhibitors():
        try:
            pids = [int(line) for line in open(record).read().split()]
        except FileNotFoundError:
            return []
        return [pid for pid in pids if os.path.exists(f"/proc/{pid}")]

    deadline = time.monotonic() + 10
    while not inhibitors() and time.monotonic() < deadline:
        time.sleep(0.02)
    with open(seen, "a") as out:
        out.write(f"start {inhibitors()}\\n")
    while not os.path.exists(release):
        time.sleep(0.02)
    with open(seen, "a") as out:
        out.write(f"end {inhibitors()}\\n")
    print("ok")
"""


def test_the_inhibitor_the_runner_starts_lives_exactly_as_long_as_the_case(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    """These machines have no system bus, so logind cannot run here: what is proved is the
    runner's side — it starts one inhibitor (its child, holding its pipe) when the case
    starts, keeps it for the whole case, and ends it when the case is over. Left unverified
    here: that a real `systemd-inhibit` takes logind's sleep lock (`held` against logind,
    seen in `systemd-inhibit --list`), that the machine then does not sleep, and macOS's
    `caffeinate` path."""
    record, seen, release = tmp_path / "inhibitors", tmp_path / "seen", tmp_path / "release"
    bin_dir = tmp_path / "inhibit-bin"
    bin_dir.mkdir()
    (bin_dir / "systemd-inhibit").write_text(RECORDING_INHIBITOR.format(record=record))
    (bin_dir / "systemd-inhibit").chmod(0o755)
    harness(alice, tmp_path, "looks", LOOKS_AT_INHIBITOR, [str(record), str(seen), str(release)])
    dataset(alice, "one", [{"key": "w", "input": {}, "expected": "ok"}])
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = runner_cli(
        tmp_path, ["run", "--wait-ms", "20000"], name="laptop", PATH=f"{bin_dir}:/usr/bin:/bin"
    )
    try:
        wait_output(runner, "connected to")
        assert not record.exists(), "no inhibitor while the runner is idle"
        run_id = api.start_run("looks", "one", f"self:{runner_id}")
        started = wait_for(lambda: seen.exists() and seen.read_text())
        [pid] = [int(line) for line in record.read_text().split()]
        assert started == f"start [{pid}]\n", "the case started with the inhibitor held"
        assert process_parent(pid) == runner.popen.pid, "the runner's own child holds it"
        release.write_text("")
        assert api.wait_run(run_id)["status"] == "succeeded"
        assert seen.read_text() == f"start [{pid}]\nend [{pid}]\n", "held to the case's end"
        # Over: the runner ends it (its next tick, 0.5 s), and starts no other while idle.
        wait_for(lambda: process_start(pid) is None, timeout=5, step=0.05)
        assert "awake:    released" in runner_status(tmp_path, "laptop")
        assert record.read_text().split() == [str(pid)], "one inhibitor for the case"
    finally:
        assert runner.stop(signal.SIGTERM) == 0, runner.output()


def process_parent(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1])


def test_a_running_case_holds_the_inhibitor_and_the_roster_says_idle_within_5s_after(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    harness(alice, tmp_path, "wait", WAIT_FOR, [str(tmp_path / "started"), str(release)])
    dataset(alice, "one", [{"key": "w", "input": {}, "expected": "ok"}])
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = runner_cli(
        tmp_path,
        ["run", "--wait-ms", "20000"],
        name="laptop",
        PATH=fake_inhibitor(tmp_path),
        EVERDICT_POWER_SUPPLY_DIR=power_supply(tmp_path / "power", on_ac=True),
    )
    try:
        wait_output(runner, "connected to")
        assert "awake:    released" in runner_status(tmp_path, "laptop")
        run_id = api.start_run("wait", "one", f"self:{runner_id}")
        wait_for(lambda: started_cases(tmp_path))
        wait_for(lambda: "awake:    held" in runner_status(tmp_path, "laptop"), step=0.3)
        assert "running 1 job" in roster_status(api, runner_id)
        release.write_text("")
        api.wait_run(run_id)
        finished = time.monotonic()
        # The lease parked with "running 1 job" is not what the roster keeps.
        wait_for(lambda: roster_status(api, runner_id) == "idle", timeout=5, step=0.2)
        assert time.monotonic() - finished < 5
        # The account page reads the same status line as the API: they agree.
        assert '">idle</span>' in page(api, alice, "/account/")
        assert "running 1 job" not in page(api, alice, "/account/")
        report = wait_for(
            lambda: (out := runner_status(tmp_path, "laptop")) and "awake:    released" in out
        )
        assert report
    finally:
        assert runner.stop(signal.SIGTERM) == 0, runner.output()


def test_on_battery_nothing_is_leased_the_roster_says_why_and_on_ac_it_leases_again(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    release.write_text("")
    harness(alice, tmp_path, "wait", WAIT_FOR, [str(tmp_path / "started"), str(release)])
    dataset(alice, "one", [{"key": "w", "input": {}, "expected": "ok"}])
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    power = power_supply(tmp_path / "power", on_ac=False)
    runner = runner_cli(
        tmp_path,
        ["run", "--wait-ms", "1000", "--allow-sleep"],
        name="laptop",
        EVERDICT_POWER_SUPPLY_DIR=power,
        EVERDICT_POWER_POLL_S="0.5",
    )
    try:
        wait_output(runner, "connected to")
        run_id = api.start_run("wait", "one", f"self:{runner_id}")
        wait_for(lambda: roster_status(api, runner_id) == "paused: on battery", timeout=10)
        assert "paused:   on battery" in runner_status(tmp_path, "laptop")
        # `hello`'s paused_reason: the idle timeout counts it offline-equivalent.
        assert Runner.objects.get(pk=runner_id).paused_reason == "on battery"
        nothing_leased_while_paused(run_id)
        assert api.ok("GET", f"/api/runs/{run_id}")["status"] != "succeeded"
        power_supply(power, on_ac=True)
        run = api.wait_run(run_id, timeout=30)
        assert run["status"] == "succeeded", run
        assert Runner.objects.get(pk=runner_id).paused_reason == ""
    finally:
        assert runner.stop(signal.SIGTERM) == 0, runner.output()
    assert "on battery (battery 80%): finishing what this runner holds" in runner.output()
    assert "on AC (AC): leasing again" in runner.output()


def test_drain_during_two_running_cases_delivers_both_leases_nothing_and_exits_0(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    harness(
        alice,
        tmp_path,
        "wait",
        WAIT_FOR,
        [str(tmp_path / "started"), str(release)],
        grader={"type": "exit_code"},
    )
    dataset(alice, "three", [{"key": f"w{i}", "input": {}, "expected": 0} for i in range(3)])
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = start_runner(tmp_path, "laptop", "--max-concurrent", "2", "--allow-sleep")
    try:
        run_id = api.start_run("wait", "three", f"self:{runner_id}", concurrency=3)
        wait_for(lambda: len(started_cases(tmp_path)) == 2)
        drain = beside(tmp_path, "laptop", ["drain"])
        assert drain.popen.wait(30) == 0, drain.output()
        assert "asked the runner" in drain.output()
        wait_output(runner, "stopping: finishing 2 running case(s)")
        release.write_text("")
        assert runner.popen.wait(30) == 0, runner.output()
    finally:
        runner.stop(signal.SIGKILL)
    assert len(started_cases(tmp_path)) == 2
    run = api.ok("GET", f"/api/runs/{run_id}")
    assert sorted(r["verdict"] for r in run["results"]) == ["pass", "pass"], run
    assert not (tmp_path / "laptop.pid").exists()


def test_a_second_runner_on_the_same_config_is_refused(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    api.pair(tmp_path, "laptop", "laptop")
    first = start_runner(tmp_path, "laptop")
    try:
        wait_output(first, "connected to")
        pid = json.loads(wait_file(tmp_path / "laptop.pid"))["pid"]
        second = start_runner(tmp_path, "laptop")
        assert second.popen.wait(30) == 1
        assert f"a runner (pid {pid}) already runs with this config" in second.output()
    finally:
        assert first.stop(signal.SIGTERM) == 0, first.output()


def test_an_outdated_runner_exits_4_with_the_update_command_and_doctor_names_a_newer_one(
    workspace: Any, alice: Any, tmp_path: Path
) -> None:
    with daphne(tmp_path, EVERDICT_MIN_RUNNER_PROTOCOL=PROTOCOL_VERSION + 1) as server:
        api = Api(server, api_key_create(user=alice, name="e2e").key)
        paired = api.ok("POST", "/api/runners", {"label": "old", "capabilities": ["python"]})
        args = ["--server", server.url, "--token", paired["token"]]
        runner = runner_cli(tmp_path, ["run", *args], name="old")
        assert runner.popen.wait(30) == 4
        assert f"upgrade it with `{UPDATE_COMMAND}`" in runner.output()
    with daphne(tmp_path, EVERDICT_RUNNER_LATEST="999.0") as server:
        args[1] = server.url
        doctor = runner_cli(tmp_path, ["doctor", *args], name="doctor")
        assert doctor.popen.wait(30) == 0, doctor.output()
        assert "everdict 999.0 is available (this is " in doctor.output()
        assert UPDATE_COMMAND in doctor.output()
        # The running runner says so too, on its status line and in its report.
        runner = runner_cli(tmp_path, ["run", "--wait-ms", "1000", *args], name="new")
        try:
            wait_output(runner, "⬆ everdict 999.0 is available (this is ")

            def reported() -> str:
                out = runner_status(tmp_path, "new")
                return out if "update:   " in out else ""

            report = wait_for(reported)
            assert UPDATE_COMMAND in report
        finally:
            assert runner.stop(signal.SIGTERM) == 0, runner.output()


def test_max_concurrent_auto_is_half_the_cores_and_a_bad_value_is_a_clear_error() -> None:
    assert auto_concurrency(cores=2) == 1
    assert auto_concurrency(cores=1) == 1
    # Half the cores this process may run on, at least 1.
    half = max(1, len(os.sched_getaffinity(0)) // 2)
    assert MAX_CONCURRENT_TYPE.convert("auto", None, None) == half
    bad = CliRunner().invoke(cli, ["run", "--max-concurrent", "lots"])
    assert bad.exit_code == 2
    assert "'lots' is neither a number nor 'auto'" in bad.output


WRITER = """
    import sys
    open(sys.argv[1] + "-" + sys.argv[2], "w").write("ran")
    print("ok")
"""


def pending_listing(tmp_path: Path) -> str:
    proc = beside(tmp_path, "laptop", ["pending"])
    proc.popen.wait(30)
    return proc.output()


def test_a_service_with_no_terminal_keeps_a_new_version_pending_until_allow_answers_it(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    harness(alice, tmp_path, "writer", WRITER, [str(marker), "{case.key}"])
    dataset(alice, "one", [{"key": "c0", "input": {}, "expected": "ok"}])
    dataset(alice, "two", [{"key": "c1", "input": {}, "expected": "ok"}])
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = runner_cli(
        tmp_path,
        ["run", "--service", "--wait-ms", "2000", "--allow-sleep", "--consent-timeout", "60"],
        name="laptop",
        allow_any=False,
    )
    target = f"self:{runner_id}"
    try:
        wait_output(runner, "connected to")
        assert "anything else: wait for an answer" in runner.output()
        run_id = api.start_run("writer", "one", target)

        def first_waits() -> str:
            listing = pending_listing(tmp_path)
            return listing if "[1] acme/writer@1" in listing else ""

        waiting = wait_for(first_waits)
        assert "the server asks this runner to run a harness version you have not allowed" in (
            waiting
        )
        assert "allow --pending 1" in waiting
        wait_for(lambda: "waiting for consent on acme/writer@1" in roster_status(api, runner_id))
        assert "cases:    1 running, 1 waiting for consent" in runner_status(tmp_path, "laptop")
        assert not (tmp_path / "marker-c0").exists()
        answer = beside(tmp_path, "laptop", ["allow", "--pending", "1"])
        assert answer.popen.wait(30) == 0, answer.output()
        assert "acme/writer@1 runs once (question 1)" in answer.output()
        run = api.wait_run(run_id)
        assert run["results"][0]["verdict"] == "pass", run
        assert (tmp_path / "marker-c0").exists()

        run_id = api.start_run("writer", "two", target)
        wait_for(lambda: "[2] acme/writer@1" in pending_listing(tmp_path))
        refuse = beside(
            tmp_path, "laptop", ["allow", "--pending", "2", "--refuse", "--reason", "not today"]
        )
        assert refuse.popen.wait(30) == 0, refuse.output()
        refused = api.wait_run(run_id)
    finally:
        assert runner.stop(signal.SIGTERM) == 0, runner.output()
    error = refused["results"][0]["error"]
    assert "the member refused to run harness acme/writer@1 on this runner (not today)" in error
    assert not (tmp_path / "marker-c1").exists()
    assert "nothing waits for your consent" in pending_listing(tmp_path)


SPAN = """
    import json, time
    start = time.time()
    time.sleep(1)
    print(json.dumps({"start": start, "end": time.time()}))
"""


def test_a_slots_2_harness_on_max_concurrent_2_runs_one_case_at_a_time(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    harness(alice, tmp_path, "browser", SPAN, [], slots=2, grader={"type": "exit_code"})
    dataset(alice, "two", [{"key": f"b{i}", "input": {}, "expected": 0} for i in range(2)])
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    # An inhibitor that cannot take the lock (no system bus): said once, not per case.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    refusing = bin_dir / "systemd-inhibit"
    refusing.write_text("#!/bin/sh\necho 'Failed to connect to bus: No such file' >&2\nexit 1\n")
    refusing.chmod(0o755)
    runner = runner_cli(
        tmp_path,
        ["run", "--wait-ms", "2000", "--max-concurrent", "2"],
        name="laptop",
        PATH=f"{bin_dir}:/usr/bin:/bin",
    )
    try:
        run = api.wait_run(api.start_run("browser", "two", f"self:{runner_id}", concurrency=2))
    finally:
        assert runner.stop(signal.SIGTERM) == 0, runner.output()
    said = "cannot keep this machine awake while cases run: Failed to connect to bus"
    assert runner.output().count(said) == 1, runner.output()
    assert run["status"] == "succeeded", run
    first, second = sorted(
        (json.loads(r["output"]) for r in run["results"]), key=lambda s: s["start"]
    )
    assert second["start"] >= first["end"], (first, second)


def test_service_commands_through_the_cli_install_report_the_server_and_uninstall(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    home = tmp_path / "home"
    home.mkdir()

    def in_home(*args: str) -> Any:
        config = str(tmp_path / "laptop.json")
        log = f"service-{time.monotonic_ns()}"
        proc = runner_cli(
            tmp_path,
            ["service", *args],
            name=log,
            EVERDICT_RUNNER_CONFIG=config,
            HOME=home,
            XDG_CONFIG_HOME=home / ".config",
        )
        proc.popen.wait(60)
        return proc

    dry = in_home("install", "--dry-run")
    assert dry.popen.returncode == 0, dry.output()
    assert "RestartPreventExitStatus=3 4" in dry.output()
    assert f"--config {tmp_path / 'laptop.json'} --service" in dry.output()
    assert not (home / ".config" / "systemd").exists()
    installed = in_home("install")
    assert installed.popen.returncode == 0, installed.output()
    unit = home / ".config" / "systemd" / "user" / "everdict-runner.service"
    assert unit.exists()
    # No user service manager answers on these machines: the exact command is printed.
    assert "systemctl --user" in installed.output(), installed.output()
    status = in_home("status")
    assert f"server:   runner {runner_id} “laptop” of alice" in status.output(), status.output()
    assert "runner:   not running" in status.output()
    removed = in_home("uninstall")
    assert removed.popen.returncode == 0, removed.output()
    assert not unit.exists()


def test_unplugged_while_a_lease_is_parked_the_lease_is_called_off_and_nothing_taken(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    release.write_text("")
    harness(alice, tmp_path, "wait", WAIT_FOR, [str(tmp_path / "started"), str(release)])
    dataset(alice, "one", [{"key": "w", "input": {}, "expected": "ok"}])
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    power = power_supply(tmp_path / "power", on_ac=True)
    parking = ParkedPolls(api.server.url)
    runner = runner_cli(
        tmp_path,
        ["run", "--wait-ms", "30000", "--allow-sleep"],
        name="laptop",
        EVERDICT_POWER_SUPPLY_DIR=power,
        EVERDICT_POWER_POLL_S="0.5",
    )
    try:
        wait_output(runner, "connected to")
        parking.wait()  # its first lease is parked: its claim found nothing, it waits 30 s
        power_supply(power, on_ac=False)
        wait_for(lambda: roster_status(api, runner_id) == "paused: on battery", timeout=10)
        # The lease called off has left the server too: nothing parked could take a job.
        wait_for(lambda: metric(api.server.url, "everdict_parked_long_polls") == 0, timeout=30)
        run_id = api.start_run("wait", "one", f"self:{runner_id}")
        nothing_leased_while_paused(run_id)
        power_supply(power, on_ac=True)
        assert api.wait_run(run_id, timeout=30)["status"] == "succeeded"
    finally:
        assert runner.stop(signal.SIGTERM) == 0, runner.output()


@pytest.mark.parametrize(
    ("platform", "code", "exits"),
    [("darwin", 4, 0), ("darwin", 3, 0), ("darwin", 1, 1), ("linux", 4, 4), ("linux", 3, 3)],
)
def test_under_launchd_a_final_exit_is_0_after_saying_why_and_systemd_keeps_the_code(
    monkeypatch: pytest.MonkeyPatch, platform: str, code: int, exits: int
) -> None:
    from runnercli.commands.run import _service_exit

    monkeypatch.setattr(sys, "platform", platform)
    assert _service_exit(code) == exits


def test_answering_a_question_that_is_not_pending_or_contradicting_itself_is_a_clear_error(
    tmp_path: Path,
) -> None:
    config = tmp_path / "runner.json"
    env = {"EVERDICT_RUNNER_CONFIG": str(config)}
    cli_runner = CliRunner()
    none = cli_runner.invoke(cli, ["allow", "--pending", "9"], env=env)
    assert none.exit_code == 1
    assert "no question 9 is pending (pending: none)" in none.output
    both = cli_runner.invoke(cli, ["allow", "--pending", "1", "--always", "--refuse"], env=env)
    assert both.exit_code == 2
    assert "--always and --refuse contradict each other" in both.output
    mixed = cli_runner.invoke(cli, ["allow", "--pending", "1", "acme/writer"], env=env)
    assert mixed.exit_code == 2
    assert "give no harness with it" in mixed.output
    bare = cli_runner.invoke(cli, ["allow"], env=env)
    assert bare.exit_code == 2
    assert "name a harness (WORKSPACE/NAME[@VERSION]) or --pending N" in bare.output
    listing = cli_runner.invoke(cli, ["pending"], env=env)
    assert listing.exit_code == 0
    assert "nothing waits for your consent" in listing.output
