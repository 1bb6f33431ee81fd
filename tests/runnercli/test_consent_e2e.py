"""Consent end to end: a real daphne and scheduler, the real runner CLI — under a pseudo-
terminal (pexpect) where the member is asked, as a plain process where nobody can answer.

Only the HTTP API, the pages and the CLI are used, as a member would.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest
from django.test import Client

from accounts.services import api_key_create
from scorecards.models import Membership, Role
from scorecards.services import dataset_create, harness_create
from tests.live import daphne, runner_cli, scheduler, sealed_host
from tests.runnercli.test_e2e import Api, wait_output

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

LEASE_TTL_S = 3
PROMPT = "Run it? [o]nce / [a]lways for this version / [n]o"
WRITER = """
    import sys
    open(sys.argv[1] + "-" + sys.argv[2], "w").write("ran")
    print("ok")
"""


@pytest.fixture
def api(workspace: Any, alice: Any, bob: Any, tmp_path: Path) -> Iterator[Api]:
    # bob writes the harnesses (an admin), alice runs them on her own machine.
    Membership.objects.filter(workspace=workspace, user=bob).update(role=Role.ADMIN)
    env = {"EVERDICT_LEASE_TTL_S": LEASE_TTL_S, "EVERDICT_QUEUE_IDLE_TIMEOUT_S": 120}
    with daphne(tmp_path, **env) as server, scheduler(tmp_path, **env):
        yield Api(server, api_key_create(user=alice, name="e2e").key)


def writer_harness(author: Any, tmp_path: Path, marker: Path, *extra: str, **spec: Any) -> None:
    script = tmp_path / "writer.py"
    script.write_text(textwrap.dedent(WRITER))
    harness_create(
        user=author,
        workspace_slug="acme",
        name="writer",
        spec={
            "command": [sys.executable, str(script), str(marker), "{case.key}", *extra],
            "timeout_s": 60,
            "capabilities": ["python"],
            **spec,
        },
    )


def cases(name: str, *keys: str) -> None:
    from scorecards.models import HarnessVersion

    author = HarnessVersion.objects.filter(workspace__slug="acme").first()
    dataset_create(
        user=author.created_by if author else None,
        workspace_slug="acme",
        name=name,
        cases=[{"key": key, "input": {}, "expected": "ok"} for key in keys],
    )


def on_a_terminal(tmp_path: Path, name: str, *args: str) -> pexpect.spawn:
    """`python -m runnercli run` under a pseudo-terminal: stdin and stdout are a TTY."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env |= {
        "PYTHONUNBUFFERED": "1",
        "EVERDICT_RUNNER_CONFIG": str(tmp_path / f"{name}.json"),
        "NO_COLOR": "1",
        "TERM": "xterm",
        **sealed_host(tmp_path),
    }
    return pexpect.spawn(
        sys.executable,
        ["-m", "runnercli", "run", "--wait-ms", "2000", *args],
        env=env,
        encoding="utf-8",
        codec_errors="replace",
        timeout=60,
        dimensions=(50, 250),
        logfile=(tmp_path / f"{name}.pty.log").open("w"),
    )


def stop(child: pexpect.spawn) -> None:
    if child.isalive():
        child.kill(signal.SIGTERM)
        child.expect(pexpect.EOF, timeout=30)


def page(api: Api, user: Any, path: str) -> str:
    """A page as `user` sees it, over HTTP from the live server."""
    client = Client()
    client.force_login(user)
    request = urllib.request.Request(
        api.server.url + path, headers={"Cookie": f"sessionid={client.cookies['sessionid'].value}"}
    )
    with urllib.request.urlopen(request, timeout=30) as reply:
        return str(reply.read().decode())


def eventually(check: Any, timeout: float = 15) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def test_on_a_terminal_the_member_sees_what_will_run_and_no_means_it_never_runs(
    api: Api, alice: Any, bob: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    writer_harness(bob, tmp_path, marker, env={"GREETING": "hello there", "NO_COLOR": "1"})
    cases("two", "c0\x1b[2K", "c1")
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    child = on_a_terminal(tmp_path, "laptop")
    try:
        child.expect("connected to")
        run_id = api.start_run("writer", "two", f"self:{runner_id}")
        child.expect(re.escape(PROMPT))
        shown = child.before
        waiting = "waiting for consent on acme/writer@1"
        roster = eventually(
            lambda: (
                [r["status"] for r in api.ok("GET", "/api/runners") if r["id"] == runner_id]
                == [waiting]
            )
        )
        assert roster, api.ok("GET", "/api/runners")
        assert waiting in page(api, alice, f"/runs/{run_id}/")
        child.sendline("n")
        child.expect("→ refused acme/writer@1")
        run = api.wait_run(run_id)
    finally:
        stop(child)

    script = tmp_path / "writer.py"
    assert f"'{sys.executable}' '{script}' '{marker}' '{{case.key}}'" in shown
    assert "(argv, no shell: each quoted element is one argument)" in shown
    assert "GREETING='hello there'" in shown and "NO_COLOR='1'" in shown
    assert "timeout:     60 s" in shown
    assert "workspace:   acme" in shown
    assert "written by:  bob" in shown
    assert f"run by:      alice (run {run_id}, case 'c0\\x1b[2K')" in shown
    # The escape sequence in the case key reached the terminal as text, never as a command.
    log = (tmp_path / "laptop.pty.log").read_text()
    assert "c0\x1b[2K" not in log and "c0\\x1b[2K" in log

    assert not list(tmp_path.glob("marker*"))  # the harness never ran
    assert log.count(PROMPT) == 1  # "no" is not asked again for the next case
    assert run["status"] == "failed"
    errors = {r["case"]: r["error"] for r in run["results"]}
    assert set(errors) == {"c0\x1b[2K", "c1"}
    for error in errors.values():
        assert "the member refused to run harness acme/writer@1 on this runner" in error
        assert "to allow it: `python -m runnercli allow acme/writer@1`" in error


def test_always_runs_the_next_case_without_asking_and_a_new_version_asks_again(
    api: Api, alice: Any, bob: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    writer_harness(bob, tmp_path, marker)
    cases("two", "c0", "c1")
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    child = on_a_terminal(tmp_path, "laptop", "--max-concurrent", "2")
    try:
        child.expect("connected to")
        # Both cases arrive at once: one question at a time, and one answer serves both.
        first = api.start_run("writer", "two", f"self:{runner_id}", concurrency=2)
        child.expect(re.escape(PROMPT))
        assert eventually(
            lambda: (
                "waiting for consent on acme/writer@1 (+1 more)"
                in [r["status"] for r in api.ok("GET", "/api/runners")]
            )
        )
        child.sendline("a")
        child.expect("→ acme/writer@1 allowed from now on, pinned to sha256:")
        assert api.wait_run(first)["status"] == "succeeded"
        assert (tmp_path / "marker-c0").exists() and (tmp_path / "marker-c1").exists()

        writer_harness(bob, tmp_path, marker, "--changed")  # version 2: another command
        second = api.start_run("writer", "two", f"self:{runner_id}")
        child.expect(re.escape(PROMPT))
        assert "harness:     writer version 2" in child.before
        assert "'--changed'" in child.before
        child.sendline("o")
        child.expect("→ running acme/writer@2 once")
        child.expect(re.escape(PROMPT))  # "once" is this case only
        child.sendline("o")
        assert api.wait_run(second)["status"] == "succeeded"
    finally:
        stop(child)
    log = (tmp_path / "laptop.pty.log").read_text()
    assert log.count(PROMPT) == 3
    trust = json.loads((tmp_path / "trust.json").read_text())
    [(server, store)] = trust["servers"].items()
    assert server == api.server.url
    assert store["allow"] == ["acme/writer@1"]
    assert set(store["pins"]) == {"acme/writer@1"}
    listed = runner_cli(tmp_path, ["trust"], name="laptop")
    assert listed.popen.wait(30) == 0
    assert "acme/writer@1 pinned to sha256:" in listed.output()


def test_no_answer_within_the_consent_timeout_refuses_the_case(
    api: Api, alice: Any, bob: Any, tmp_path: Path
) -> None:
    writer_harness(bob, tmp_path, tmp_path / "marker")
    cases("one", "c0")
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    child = on_a_terminal(tmp_path, "laptop", "--consent-timeout", "2")
    try:
        child.expect("connected to")
        run = api.start_run("writer", "one", f"self:{runner_id}")
        child.expect(re.escape(PROMPT))
        child.expect("→ refused acme/writer@1", timeout=20)
        result = api.wait_run(run)["results"][0]
    finally:
        stop(child)
    assert not (tmp_path / "marker-c0").exists()
    assert "no answer within 2s to run harness acme/writer@1 on this runner" in result["error"]
    assert "`python -m runnercli allow acme/writer@1`" in result["error"]


def test_without_a_terminal_it_refuses_until_allowed_and_allow_any_runs_anything(
    api: Api, alice: Any, bob: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "marker"
    writer_harness(bob, tmp_path, marker)
    cases("one", "c0")
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    target = f"self:{runner_id}"

    def runner(*args: str) -> Any:
        return runner_cli(
            tmp_path, ["run", "--wait-ms", "2000", *args], name="laptop", allow_any=False
        )

    plain = runner()
    try:
        refused = api.wait_run(api.start_run("writer", "one", target))
    finally:
        plain.stop(signal.SIGTERM)
    assert not (tmp_path / "marker-c0").exists()
    error = refused["results"][0]["error"]
    assert "harness writer v1 is not allowed on this runner" in error
    assert "allow it with `python -m runnercli allow acme/writer@1` (this version)" in error
    assert "`python -m runnercli allow acme/writer` (every version)" in error
    assert "Run it?" not in plain.output()

    allowed = runner("--allow", "acme/writer")
    try:
        wait_output(allowed, "allowed: acme/writer")
        assert api.wait_run(api.start_run("writer", "one", target))["status"] == "succeeded"
    finally:
        allowed.stop(signal.SIGTERM)
    assert (tmp_path / "marker-c0").read_text() == "ran"
    assert not (tmp_path / "trust.json").exists()  # --allow is for that session only

    writer_harness(bob, tmp_path, tmp_path / "any")  # version 2, allowed by nothing
    anything = runner("--allow-any")
    try:
        wait_output(anything, "⚠ --allow-any: this runner runs any harness")
        assert api.wait_run(api.start_run("writer", "one", target))["status"] == "succeeded"
    finally:
        anything.stop(signal.SIGTERM)
    assert (tmp_path / "any-c0").exists()


def test_a_case_key_holding_an_escape_sequence_prints_harmlessly(
    api: Api, alice: Any, bob: Any, tmp_path: Path
) -> None:
    writer_harness(bob, tmp_path, tmp_path / "marker")
    cases("evil", "evil\x1b[2K\x1b[1Akey")
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = runner_cli(tmp_path, ["run", "--wait-ms", "2000"], name="laptop")
    try:
        assert api.wait_run(api.start_run("writer", "evil", f"self:{runner_id}"))["status"] == (
            "succeeded"
        )
        wait_output(runner, "✓ completed")
    finally:
        runner.stop(signal.SIGTERM)
    output = runner.output()
    assert "\x1b" not in output
    assert "case evil\\x1b[2K\\x1b[1Akey: ▶ started writer v1" in output


def test_stopping_the_runner_while_it_asks_hands_the_case_back(
    api: Api, alice: Any, bob: Any, tmp_path: Path
) -> None:
    from runners.models import JobAttempt

    writer_harness(bob, tmp_path, tmp_path / "marker")
    cases("one", "c0")
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    child = on_a_terminal(tmp_path, "laptop")
    try:
        child.expect("connected to")
        run_id = api.start_run("writer", "one", f"self:{runner_id}")
        child.expect(re.escape(PROMPT))
        child.kill(signal.SIGTERM)
        child.expect("■ handed back")
        child.expect(pexpect.EOF)
    finally:
        stop(child)
    child.close()
    assert child.exitstatus == 0
    attempt = JobAttempt.objects.get(job__run_id=run_id)
    # A member's stop is a release: back to the queue, no attempt spent.
    assert (attempt.status, attempt.reason) == (
        "superseded",
        "released by its runner: the runner was stopped by its owner",
    )
    assert attempt.job.status == "queued"  # another session may still ask, or run it
