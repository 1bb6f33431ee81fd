"""Service harnesses end to end: daphne, the scheduler, the real runner CLI and a real Docker
daemon (images made here, nothing pulled).

Concurrent cases of a version share one network and one container per service (asked of the
Engine API), each reaching it at its URL; a second version has a topology of its own; an
idle topology goes, so does every topology at Ctrl-C, and what a `kill -9` left is removed by
the next `run` before its first lease. A case service whose probe never answers ends its case
as an error naming it with its log, the other cases pass; case services of 8 cases at 4 at a
time each have their own port and leave no process behind.
"""

from __future__ import annotations

import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from django.test import Client

from accounts.services import api_key_create
from runnercli.protocol import HarnessSpec, harness_digest
from scorecards.links import case_url
from scorecards.models import HarnessVersion
from tests.live import daphne, scheduler
from tests.runnercli.dockerimages import HTTPD, PAGE, busybox_image
from tests.runnercli.servicejobs import HTTP_SERVER
from tests.runnercli.test_e2e import Api, dataset, harness, start_runner, wait_output
from tests.runnercli.test_service_containers import labelled

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def api(workspace: Any, alice: Any, tmp_path: Path) -> Iterator[Api]:
    env = {"EVERDICT_LEASE_TTL_S": 3, "EVERDICT_QUEUE_IDLE_TIMEOUT_S": 120}
    with daphne(tmp_path, **env) as server, scheduler(tmp_path, **env):
        yield Api(server, api_key_create(user=alice, name="e2e").key)


# A case: fetch a page from the service's URL (its placeholder, and its variable) and print
# what it got, with where.
FETCH = """
    import os, sys, time, urllib.request
    url, page = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "/"
    assert url == os.environ["EVERDICT_SERVICE_WEB_URL"], (url, os.environ)
    if os.path.exists("page.html") is False and len(sys.argv) > 3:
        open("page.html", "w").write(sys.argv[3])
    with urllib.request.urlopen(url + page, timeout=10) as reply:
        body = reply.read().decode()
    time.sleep(float(os.environ.get("CASE_SLEEP_S", "0")))
    print(f"{url} {body.strip()}")
"""


def container_harness(user: Any, tmp_path: Path, name: str, **env: str) -> None:
    web = {
        "image": busybox_image(),
        "command": HTTPD,
        "ports": [8080],
        "ready": {"http": "/", "port": 8080, "timeout_s": 30},
        "env": env,
    }
    spec = {"services": {"web": web}, "grader": {"type": "contains"}, "env": {"CASE_SLEEP_S": "1"}}
    harness(user, tmp_path, name, FETCH, ["{service.web.url}"], **spec)


def cases(name: str, count: int, expected: str, **input: Any) -> list[dict[str, Any]]:
    return [{"key": f"{name}-{i}", "input": input, "expected": expected} for i in range(count)]


def urls(run: dict[str, Any]) -> set[str]:
    return {result["output"].split()[0] for result in run["results"]}


@pytest.mark.docker
def test_four_cases_share_a_topology_a_second_version_has_its_own_and_idle_ones_go(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    container_harness(alice, tmp_path, "site")
    dataset(alice, "pages", cases("page", 4, PAGE.strip()))
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = start_runner(tmp_path, "laptop", "--max-concurrent", "4", "--services-idle-s", "6")
    try:
        wait_output(runner, "connected to")
        first = api.wait_run(api.start_run("site", "pages", f"self:{runner_id}", 4), timeout=90)
        containers, networks = labelled(digest_of("site", 1))
        container_harness(alice, tmp_path, "site", GREETING="v2")  # version 2
        second = api.wait_run(api.start_run("site", "pages", f"self:{runner_id}", 4), timeout=90)
        both = [digest_of("site", 1), digest_of("site", 2)]
        assert [len(labelled(digest)[0]) for digest in both] == [1, 1]
        _wait_gone(runner, both, timeout=30)
    finally:
        assert runner.stop(signal.SIGTERM) == 0, runner.output()
    assert first["status"] == "succeeded", first
    assert second["status"] == "succeeded", second
    assert len(containers) == 1 and len(networks) == 1
    assert len(urls(first)) == 1 and len(urls(second)) == 1 and urls(first) != urls(second)
    case = api.ok("GET", f"/api/runs/{first['id']}/cases/page-0")
    fingerprint = case["runs"][0]["result"]["fingerprint"]
    assert fingerprint["images"]["web"]["id"].startswith("sha256:")
    assert "idle for 6s: stopping" in runner.output()


def digest_of(name: str, version: int) -> str:
    """The digest of a stored harness version: its topology's `everdict.topology` label."""
    spec = HarnessVersion.objects.get(name=name, version=version).spec
    return harness_digest(HarnessSpec.model_validate(spec))


def _wait_gone(runner: Any, digests: list[str], timeout: float) -> None:
    import time

    deadline = time.monotonic() + timeout
    while any(labelled(digest) != ([], []) for digest in digests):
        assert time.monotonic() < deadline, runner.output()
        time.sleep(0.2)


@pytest.mark.docker
def test_ctrl_c_stops_the_topologies_and_the_next_run_removes_what_a_kill_9_left(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    container_harness(alice, tmp_path, "site")
    dataset(alice, "pages", cases("page", 2, PAGE.strip()))
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = start_runner(tmp_path, "laptop", "--max-concurrent", "2")
    try:
        wait_output(runner, "connected to")
        run = api.wait_run(api.start_run("site", "pages", f"self:{runner_id}", 2), timeout=90)
        assert run["status"] == "succeeded", run
        digest = digest_of("site", 1)
        assert len(labelled(digest)[0]) == 1  # warm: the idle time is 300 s
    finally:
        code = runner.stop(signal.SIGINT)
    assert code == 0, runner.output()
    assert labelled(digest) == ([], []), runner.output()

    killed = start_runner(tmp_path, "laptop", "--max-concurrent", "2")
    try:
        wait_output(killed, "connected to")
        api.wait_run(api.start_run("site", "pages", f"self:{runner_id}", 2), timeout=90)
    finally:
        killed.popen.kill()
        killed.popen.wait(10)
    left = labelled(digest)
    assert len(left[0]) == 1 and len(left[1]) == 1  # a kill -9 stops nothing

    again = start_runner(tmp_path, "laptop")
    try:
        wait_output(again, "connected to")
        assert labelled(digest) == ([], [])
    finally:
        assert again.stop(signal.SIGTERM) == 0, again.output()
    output = again.output()
    removed = output.index("removed services left by a stopped runner")
    assert removed < output.index("connected to"), output


SERVE_OR_HANG = """
    import http.server, sys, time
    port, mode = int(sys.argv[1]), sys.argv[2]
    print(f"starting in mode {mode}", flush=True)
    if mode == "hang":
        print("waiting for a database that never comes", flush=True)
        time.sleep(600)
    handler = http.server.SimpleHTTPRequestHandler
    http.server.HTTPServer(("127.0.0.1", port), handler).serve_forever()
"""


def test_a_case_service_that_never_answers_ends_only_its_case_as_an_error(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    server = tmp_path / "serve_or_hang.py"
    server.write_text(__import__("textwrap").dedent(SERVE_OR_HANG))
    web = {
        "scope": "case",
        "cwd": "case",
        "run": [sys.executable, str(server), "{port}", "{input.mode}"],
        "ready": {"http": "/", "timeout_s": 2},
    }
    spec = {"services": {"web": web}, "grader": {"type": "contains"}}
    harness(
        alice, tmp_path, "site", FETCH, ["{service.web.url}", "/page.html", "{case.key}"], **spec
    )
    dataset(
        alice,
        "modes",
        [
            {"key": "ok-1", "input": {"mode": "serve"}, "expected": "ok-1"},
            {"key": "hangs", "input": {"mode": "hang"}, "expected": "hangs"},
            {"key": "ok-2", "input": {"mode": "serve"}, "expected": "ok-2"},
        ],
    )
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = start_runner(tmp_path, "laptop", "--max-concurrent", "3")
    try:
        wait_output(runner, "connected to")
        run = api.wait_run(api.start_run("site", "modes", f"self:{runner_id}", 3), timeout=90)
    finally:
        assert runner.stop(signal.SIGTERM) == 0, runner.output()
    verdicts = {r["case"]: r["verdict"] for r in run["results"]}
    assert verdicts == {"ok-1": "pass", "hangs": "error", "ok-2": "pass"}, run
    (error,) = [r["error"] for r in run["results"] if r["case"] == "hangs"]
    assert "service web did not become ready" in error
    assert "http GET / on its {port} answering 200 within 2s" in error
    assert "waiting for a database that never comes" in error
    lines = [log["line"] for log in api.logs(run["id"]) if log["case"] == "hangs"]
    assert "[service web] waiting for a database that never comes" in lines
    # The case page shows the service with its log tail.
    client = Client()
    client.force_login(alice)
    page = client.get(case_url(run["id"], "hangs")).content.decode()
    panel = page[page.index('id="service-web"') : page.index("<h2>Log</h2>")]
    assert "started for this case" in panel
    assert "waiting for a database that never comes" in panel
    served = client.get(case_url(run["id"], "ok-1")).content.decode()
    assert "Serving HTTP on 127.0.0.1" not in served  # said before the case: not its lines


def test_case_services_of_eight_cases_four_at_a_time_each_have_a_port_and_all_go(
    api: Api, alice: Any, tmp_path: Path
) -> None:
    mark = uuid.uuid4().hex
    web = {
        "scope": "case",
        "cwd": "case",
        "run": HTTP_SERVER,
        "env": {"EVERDICT_TEST_MARK": mark},
        "ready": {"http": "/", "timeout_s": 20},
    }
    spec = {"services": {"web": web}, "grader": {"type": "contains"}}
    harness(
        alice, tmp_path, "site", FETCH, ["{service.web.url}", "/page.html", "{case.key}"], **spec
    )
    dataset(alice, "eight", [{"key": f"p{i}", "input": {}, "expected": f"p{i}"} for i in range(8)])
    runner_id = api.pair(tmp_path, "laptop", "laptop")
    runner = start_runner(tmp_path, "laptop", "--max-concurrent", "4", "--max-service-starts", "2")
    try:
        wait_output(runner, "connected to")
        run = api.wait_run(api.start_run("site", "eight", f"self:{runner_id}", 8), timeout=120)
    finally:
        assert runner.stop(signal.SIGTERM) == 0, runner.output()
    assert run["status"] == "succeeded", run
    assert len(urls(run)) == 8  # every case its own server, on a port of its own
    assert [p for p in psutil.process_iter() if _marked(p, mark)] == []


def _marked(proc: psutil.Process, mark: str) -> bool:
    try:
        return proc.environ().get("EVERDICT_TEST_MARK") == mark
    except (psutil.Error, OSError):
        return False
