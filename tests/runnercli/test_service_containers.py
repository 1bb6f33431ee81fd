"""Container services through a real Docker daemon (no registry: images are made here): one
network and one container per service for concurrent cases of a version, labelled; the image's
fingerprint; a probe Docker's port proxy cannot fool; an image that cannot be pulled, pulled
once; what a killed runner left removed, what a live one holds kept."""

from __future__ import annotations

import asyncio
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from runnercli.case.services import Inventory, ServiceError, Topologies
from runnercli.case.services.engine import LABEL_TOPOLOGY
from tests.runnercli.dockerimages import HTTPD, PAGE, busybox_image
from tests.runnercli.servicejobs import runtime, service_job

pytestmark = pytest.mark.docker


# In every service's env: this session's topologies are its own, whatever another session
# (or one killed midway) left on the same daemon.
SESSION = {"EVERDICT_TEST_SESSION": uuid.uuid4().hex}


def httpd(**overrides: Any) -> dict[str, Any]:
    env = {**SESSION, **overrides.pop("env", {})}
    return {
        "image": busybox_image(),
        "command": HTTPD,
        "ports": [8080],
        "ready": {"http": "/", "port": 8080, "timeout_s": 20},
        "env": env,
        **overrides,
    }


def labelled(digest: str) -> tuple[list[Any], list[Any]]:
    """The containers and networks of the topology of `digest` (of every one, when empty)."""
    import docker

    client = docker.from_env()
    label = {"label": [f"{LABEL_TOPOLOGY}={digest}" if digest else LABEL_TOPOLOGY]}
    containers = client.containers.list(all=True, filters=label, ignore_removed=True)
    return containers, client.networks.list(filters=label)


@pytest.fixture
def cleanup() -> Any:
    """Topologies a test made are closed whatever it asserted."""
    made: list[Topologies] = []
    yield made.append
    for topologies in made:
        asyncio.run(topologies.close())


async def until(check: Any, timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not await asyncio.to_thread(check):
        assert loop.time() < deadline, f"not so within {timeout_s}s"
        await asyncio.sleep(0.1)


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return reply.read().decode()


def test_concurrent_cases_share_one_network_and_one_container_per_service(
    tmp_path: Path, cleanup: Any
) -> None:
    topologies = Topologies(runtime(tmp_path), idle_s=0.5)
    cleanup(topologies)
    job = service_job({"web": httpd(), "other": httpd()})
    digest = job.harness.digest

    async def main() -> None:
        got = await asyncio.gather(*(topologies.acquire(job) for _ in range(4)))
        (topology,) = {id(t): t for t in got}.values()
        containers, networks = labelled(digest)
        assert sorted(c.labels["everdict.service"] for c in containers) == ["other", "web"]
        assert len(networks) == 1
        assert all(c.labels["everdict.runner"] == "7" for c in containers)
        assert all(
            list(c.attrs["NetworkSettings"]["Networks"]) == [networks[0].name] for c in containers
        )
        for endpoint in topology.endpoints().values():
            assert await asyncio.to_thread(fetch, endpoint.url + "/") == PAGE
            assert endpoint.ports == {8080: endpoint.port}
        image = topology.images["web"]
        assert image.id.startswith("sha256:") and image.digest == ""  # imported, no registry
        for _ in got:
            topologies.release(job, topology)
        await until(lambda: labelled(digest) == ([], []), timeout_s=20)

    asyncio.run(main())


def test_a_tcp_probe_is_not_fooled_by_dockers_port_proxy(tmp_path: Path) -> None:
    topologies = Topologies(runtime(tmp_path))
    silent = httpd(command=["/bin/sh", "-c", "echo 'not listening'; sleep 600"])
    silent["ready"] = {"tcp": 8080, "timeout_s": 2}
    job = service_job({"db": silent})

    with pytest.raises(ServiceError) as failed:
        asyncio.run(topologies.acquire(job))
    assert "service db did not become ready" in failed.value.summary
    assert "tcp :8080 within 2s" in failed.value.summary
    assert failed.value.log_tail == ["not listening"]
    assert labelled(job.harness.digest) == ([], [])


def test_an_image_that_cannot_be_pulled_is_pulled_once_for_concurrent_cases(
    tmp_path: Path,
) -> None:
    events: list[str] = []
    topologies = Topologies(runtime(tmp_path, events))
    # A registry on a closed port of this machine: the pull fails at once, reaching nothing.
    job = service_job({"web": httpd(image="127.0.0.1:9/everdict/absent:1")})

    async def main() -> list[Any]:
        return await asyncio.gather(
            *(topologies.acquire(job) for _ in range(3)), return_exceptions=True
        )

    failures = asyncio.run(main())
    assert all(isinstance(f, ServiceError) for f in failures), failures
    assert "service web: cannot pull 127.0.0.1:9/everdict/absent:1" in str(failures[0])
    assert topologies.runtime.engine.pulls_started == 1
    assert any("pulling 127.0.0.1:9/everdict/absent:1 for service web" in e for e in events)


def test_leftovers_of_a_killed_runner_go_and_a_live_runners_stay(
    tmp_path: Path, cleanup: Any
) -> None:
    # A runner process that no longer exists (pid 2**22 is above the kernel's pid_max).
    dead = Topologies(runtime(tmp_path / "dead", owner=f"{2**22}:1"))
    live = Topologies(runtime(tmp_path / "live"))
    cleanup(dead)
    cleanup(live)
    gone_job = service_job({"web": httpd(env={"WHICH": "gone"})})
    kept_job = service_job({"web": httpd(env={"WHICH": "kept"})})

    async def main() -> None:
        await dead.acquire(gone_job)
        await live.acquire(kept_job)
        inventory = Inventory(live.runtime.engine, live.runtime.records)
        removed = await inventory.remove_leftovers("7", tmp_root=tmp_path)
        assert gone_job.harness.digest in [item.topology for item in removed]
        assert kept_job.harness.digest not in [item.topology for item in removed]
        assert labelled(gone_job.harness.digest) == ([], [])
        assert len(labelled(kept_job.harness.digest)[0]) == 1
        await live.close()
        assert labelled(kept_job.harness.digest) == ([], [])

    asyncio.run(main())
