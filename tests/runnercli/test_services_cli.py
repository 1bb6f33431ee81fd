"""`python -m runnercli services list | stop | prune`, as a member types them: what runs, what a
stopped runner left, and removing it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from runnercli.case.services import Records, Runtime, Topologies
from runnercli.case.services.records import services_dir_for
from tests.runnercli.servicejobs import service_job, web

DEAD_RUNNER = f"{2**22}:1"  # above the kernel's pid_max: no such process
# This session's topologies are its own, whatever another left on the same machine.
SESSION = {"EVERDICT_TEST_SESSION": uuid.uuid4().hex}


def cli(config: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "runnercli", "services", *args, "--config", str(config)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def left_behind(config: Path, tmp_path: Path, services: dict[str, Any]) -> Topologies:
    """A topology started by a runner that is gone (as after a `kill -9`), left running."""
    runtime = Runtime(
        Records(services_dir_for(config)), runner="7", owner=DEAD_RUNNER, tmp_root=tmp_path
    )
    topologies = Topologies(runtime)
    asyncio.run(topologies.acquire(service_job(services)))
    return topologies


def test_list_shows_what_a_stopped_runner_left_and_prune_removes_it(tmp_path: Path) -> None:
    config = tmp_path / "runner.json"
    job = service_job({"web": web(env=SESSION)})
    left_behind(config, tmp_path, {"web": web(env=SESSION)})
    (record,) = Records(services_dir_for(config)).all()
    assert psutil.pid_exists(record.pid)

    listed = cli(config, "list")
    assert "runner 7  (left by a stopped runner)" in listed
    assert f"web (process {record.pid} on :{record.port}, running)" in listed

    pruned = cli(config, "prune")
    assert f"removed {job.harness.digest[:16]} of runner 7" in pruned
    assert not psutil.pid_exists(record.pid) or psutil.Process(record.pid).status() == "zombie"
    assert Records(services_dir_for(config)).all() == []
    assert job.harness.digest[:16] not in cli(config, "list")


@pytest.mark.docker
def test_stop_removes_the_topologies_named_containers_and_networks_too(tmp_path: Path) -> None:
    from tests.runnercli.dockerimages import HTTPD, busybox_image
    from tests.runnercli.test_service_containers import labelled

    config = tmp_path / "runner.json"
    box = {"image": busybox_image(), "command": HTTPD, "ports": [8080],
           "ready": {"http": "/", "port": 8080}, "env": SESSION}  # fmt: skip
    topologies = left_behind(config, tmp_path, {"box": box, "web": web()})
    (topology,) = topologies.warm()
    listed = cli(config, "list")
    assert f"{topology.digest[:16]}  runner 7" in listed
    assert "box (container everdict-" in listed and f"network everdict-{topology.id}" in listed

    assert "✓ stopped 1 topology" in cli(config, "stop", topology.digest[:12])
    assert labelled(topology.digest) == ([], [])
    assert Records(services_dir_for(config)).all() == []
