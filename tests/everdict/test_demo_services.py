"""The demo's service harnesses, as `make demo` seeds them: run by the real runner CLI they
pass (the process service everywhere, the container service where Docker answers), and the
run form says "needs docker" of the container one where the runner has no Docker."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from accounts.services import api_key_create
from everdict.demo_seed import demo_seed, demo_user
from everdict.demo_web import (
    STATIC_PAGE,
    WEB_DATASET,
    WEB_DOCKER_HARNESS,
    WEB_HARNESS,
    demo_static_image,
)
from runners.services import runner_pair
from tests.live import daphne, rest, runner_cli, scheduler

pytestmark = pytest.mark.django_db(transaction=True)


def _run(tmp_path: Path, harness: str) -> dict[str, Any]:
    user = demo_user()
    demo_seed(user)
    key = api_key_create(user=user, name="demo").key
    with daphne(tmp_path) as server, scheduler(tmp_path):
        token = runner_pair(owner=user, label="here", capabilities=["python"]).token
        config = runner_cli(tmp_path, ["pair", "--server", server.url, "--token", token])
        assert config.popen.wait(30) == 0, config.output()
        runner = runner_cli(tmp_path, ["run", "--wait-ms", "2000", "--max-concurrent", "3"])
        try:
            _wait_for(lambda: "connected to" in runner.output(), runner)
            body = {"harness": harness, "dataset": WEB_DATASET, "runtime": "self:any"}
            status, run = rest(
                server.url, "POST", "/api/workspaces/demo/runs", key, body | {"concurrency": 3}
            )
            assert status == 201, run
            finished: dict[str, Any] = {}

            def done() -> bool:
                finished.update(rest(server.url, "GET", f"/api/runs/{run['id']}", key)[1])
                return finished["status"] in ("succeeded", "failed", "canceled")

            _wait_for(done, runner, timeout=90)
            return finished
        finally:
            assert runner.stop(signal.SIGTERM) == 0, runner.output()


def _wait_for(check: Any, runner: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline and runner.popen.poll() is None, runner.output()
        time.sleep(0.2)


@pytest.mark.e2e
def test_the_demo_web_harness_passes_with_its_process_service(tmp_path: Path) -> None:
    run = _run(tmp_path, WEB_HARNESS)
    assert run["status"] == "succeeded", run
    assert run["summary"]["pass"] == 3
    assert all("a page about" in r["output"] for r in run["results"])


@pytest.mark.e2e
@pytest.mark.docker
def test_the_demo_web_docker_harness_passes_where_docker_answers(tmp_path: Path) -> None:
    assert demo_static_image() is None
    run = _run(tmp_path, WEB_DOCKER_HARNESS)
    assert run["status"] == "succeeded", run
    assert all(STATIC_PAGE in r["output"] for r in run["results"]), run["results"]


def test_the_run_form_says_the_docker_harness_needs_docker(client: Client) -> None:
    user = demo_user()
    demo_seed(user)
    runner_pair(owner=user, label="no-docker-here", capabilities=["python"])
    client.force_login(user)
    page = client.get(f"/w/demo/runs/new?harness={WEB_DOCKER_HARNESS}").content.decode()
    assert f"{WEB_DOCKER_HARNESS}" in page and "needs docker" in page
    assert "lacks docker" in page
    plain = client.get(f"/w/demo/runs/new?harness={WEB_HARNESS}").content.decode()
    assert "lacks docker" not in plain  # the process one needs no Docker
