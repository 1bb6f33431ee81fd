"""Service topologies of process services, without a server: one start for concurrent cases of
a version, warm until idle, a probe that never answers named with its log, a service that
dies dropped for the next case, and nothing left running afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest

from runnercli.case.collect import Collect
from runnercli.case.execute import Execute
from runnercli.case.pipeline import CaseContext, Failed, Pipeline
from runnercli.case.prepare import Prepare
from runnercli.case.repo.stage import Repo
from runnercli.case.services import DockerPresence, NoDocker, ServiceError, Topologies, Where
from runnercli.case.services.stage import Services
from tests.runnercli.fakes import held
from tests.runnercli.gitrepos import make_checkout, snapshot, worktree_paths
from tests.runnercli.servicejobs import runtime, script_service, service_job, web


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return reply.read().decode()


async def afetch(url: str) -> str:
    return await asyncio.to_thread(fetch, url)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_concurrent_cases_of_a_version_share_one_start_and_it_stops_when_idle(
    tmp_path: Path,
) -> None:
    events: list[str] = []
    topologies = Topologies(runtime(tmp_path, events), idle_s=0.5)
    job = service_job({"web": web()})

    async def main() -> None:
        got = await asyncio.gather(*(topologies.acquire(job) for _ in range(4)))
        assert len({id(t) for t in got}) == 1
        (topology,) = set(got)
        (record,) = topologies.runtime.records.all()
        assert record.topology == job.harness.digest and not gone(record.pid)
        endpoint = topology.endpoints()["web"]
        assert "Directory listing" in await afetch(endpoint.url + "/")
        for _ in got:
            topologies.release(job, topology)
        # Warm in between: a case coming back within the idle time finds it up.
        again = await topologies.acquire(job)
        assert again is topology
        topologies.release(job, again)
        await asyncio.sleep(1.5)
        assert topologies.table == {}
        assert gone(record.pid)
        assert topologies.runtime.records.all() == []

    asyncio.run(main())
    assert sum("services up" in e for e in events) == 1
    assert any("idle for 0.5s: stopping" in e for e in events)


def test_a_second_version_gets_a_topology_of_its_own(tmp_path: Path) -> None:
    topologies = Topologies(runtime(tmp_path), idle_s=60)
    first = service_job({"web": web()})
    second = service_job({"web": web(env={"GREETING": "v2"})})
    assert first.harness.digest != second.harness.digest

    async def main() -> None:
        one, two = await asyncio.gather(topologies.acquire(first), topologies.acquire(second))
        assert one is not two
        assert one.endpoints()["web"].port != two.endpoints()["web"].port
        pids = [r.pid for r in topologies.runtime.records.all()]
        assert len(pids) == 2
        await topologies.close()
        assert all(gone(pid) for pid in pids)

    asyncio.run(main())


NEVER_READY = """
    import sys, time
    for n in range(80):
        print(f"warming up {n}", flush=True)
    print("listening nowhere", file=sys.stderr, flush=True)
    time.sleep(600)
"""


def test_a_service_that_never_answers_fails_its_cases_naming_it_the_probe_and_its_log(
    tmp_path: Path,
) -> None:
    topologies = Topologies(runtime(tmp_path), idle_s=60)
    service = script_service(tmp_path, NEVER_READY, ready={"http": "/health", "timeout_s": 1})
    job = service_job({"api": service})

    async def main() -> list[BaseException | object]:
        return await asyncio.gather(
            *(topologies.acquire(job) for _ in range(3)), return_exceptions=True
        )

    failures = asyncio.run(main())
    assert all(isinstance(f, ServiceError) for f in failures)
    error = failures[0]
    assert isinstance(error, ServiceError)
    assert error.service == "api"
    assert "service api did not become ready" in error.summary
    assert "http GET /health on its {port} answering 200 within 1s" in error.summary
    assert len(error.log_tail) == 50
    assert error.log_tail[-1] == "listening nowhere" and error.log_tail[0] == "warming up 31"
    message = str(error)
    assert message.startswith(error.summary) and message.endswith("listening nowhere")
    # Nothing is left of the failed start, and the next case starts afresh.
    assert topologies.table == {}
    assert topologies.runtime.records.all() == []


DIES_ON_REQUEST = """
    import http.server, os, sys
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
            if self.path == "/die":
                print("asked to die", flush=True)
                os._exit(3)
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


def test_a_service_that_dies_ends_its_holders_and_the_next_case_starts_it_again(
    tmp_path: Path,
) -> None:
    events: list[str] = []
    topologies = Topologies(runtime(tmp_path, events), idle_s=60)
    job = service_job({"api": script_service(tmp_path, DIES_ON_REQUEST)})

    async def main() -> None:
        topology = await topologies.acquire(job)
        url = topology.endpoints()["api"].url
        with contextlib.suppress(OSError):  # it may or may not finish its answer
            await afetch(url + "/die")
        await asyncio.wait_for(topology.died.wait(), 10)
        assert topology.death is not None
        assert "service api exited with status 3 while a case used it" in str(topology.death)
        assert topology.death.log_tail[-1] == "asked to die"
        topologies.release(job, topology)
        fresh = await topologies.acquire(job)
        assert fresh is not topology
        assert await afetch(fresh.endpoints()["api"].url + "/") == "ok"
        await topologies.close()

    asyncio.run(main())
    assert any("the next case starts it again" in e for e in events)


def test_a_case_service_gets_the_case_placeholders_and_runs_in_the_case_directory(
    tmp_path: Path,
) -> None:
    topologies = Topologies(runtime(tmp_path), idle_s=60)
    served = {"run": [*web()["run"][:-1], "{input.port_hint}{port}"], "cwd": "case"}
    job = service_job({"site": web(scope="case", **served)}, input={"port_hint": ""}, key="k1")
    case_dir = tmp_path / "case"
    case_dir.mkdir()
    (case_dir / "page.html").write_text("from the case directory")

    async def main() -> None:
        topology = await topologies.start_case(job, Where(case_dir, job.case))
        url = topology.endpoints()["site"].url
        assert await afetch(url + "/page.html") == "from the case directory"
        (pid,) = [r.pid for r in topologies.runtime.records.all()]
        await topologies.stop_case(topology)
        assert gone(pid)

    asyncio.run(main())


def test_a_container_service_without_a_docker_daemon_is_said_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    topologies = Topologies(runtime(tmp_path))
    container = {"image": "postgres:16", "ports": [5432], "ready": {"tcp": 5432}}
    job = service_job({"db": container, "web": web()})
    with pytest.raises(NoDocker) as failed:
        asyncio.run(topologies.acquire(job))
    assert failed.value.service == "db"
    assert "service db needs Docker: no Docker daemon answers at unix://" in str(failed.value)
    assert topologies.runtime.records.all() == []  # nothing of it started


DIES_AFTER_A_WHILE = """
    import http.server, sys, threading, os, time
    def die():
        time.sleep(1.5)
        print("out of memory, going", flush=True)
        os._exit(3)
    threading.Thread(target=die, daemon=True).start()
    handler = http.server.SimpleHTTPRequestHandler
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), handler).serve_forever()
"""
WAITS = """
    import os, sys, time
    print(os.environ["EVERDICT_SERVICE_API_URL"], sys.argv[1], flush=True)
    time.sleep(60)
"""


def test_the_stage_hands_the_case_its_services_and_a_death_ends_the_case_as_an_error(
    tmp_path: Path, script: Any
) -> None:
    topologies = Topologies(runtime(tmp_path), idle_s=60)
    service = script_service(tmp_path, DIES_AFTER_A_WHILE)
    job = service_job({"api": service}, command=[*script(WAITS), "{service.api.port}"])
    notes: list[str] = []
    case = CaseContext(held(job), notes=[notes.append])
    started = time.monotonic()

    async def main() -> None:
        stages = [Prepare(), Services(topologies), Execute(), Collect()]
        await Pipeline(stages).run(case)
        assert topologies.table == {}  # dropped: the next case starts it again
        await topologies.close()

    asyncio.run(main())
    assert time.monotonic() - started < 20
    assert isinstance(case.ending, Failed) and case.ending.verb == "error"
    assert "service api exited with status 3 while a case used it" in case.ending.reason
    assert case.ending.reason.endswith("out of memory, going")
    assert "[service api] out of memory, going" in notes
    assert case.result is None
    assert any(
        note.startswith("services: web-eval v1 (version): api at http://127.0.0.1:")
        for note in notes
    )
    assert case.placeholders["service.api.url"] == case.env["EVERDICT_SERVICE_API_URL"]
    assert case.placeholders["service.api.url"].endswith(
        ":" + case.placeholders["service.api.port"]
    )


def test_the_stage_puts_what_the_services_logged_during_the_case_in_its_log(
    tmp_path: Path, script: Any
) -> None:
    topologies = Topologies(runtime(tmp_path), idle_s=60)
    fetch = script(
        """
        import sys, urllib.request
        print(urllib.request.urlopen(sys.argv[1] + "/missing", timeout=5).status)
        """
    )
    job = service_job({"web": web()}, command=[*fetch, "{service.web.url}"])
    notes: list[str] = []
    case = CaseContext(held(job), notes=[notes.append])

    async def main() -> None:
        await Pipeline([Prepare(), Services(topologies), Execute(), Collect()]).run(case)
        await topologies.close()

    asyncio.run(main())
    assert case.ending is None and case.result is not None
    logged = [n for n in notes if n.startswith("[service web] ")]
    # What it said during this case alone: its probe's `GET /` came before.
    assert any('"GET /missing HTTP/1.1" 404' in line for line in logged), logged
    assert not any('"GET / HTTP' in line for line in logged), logged


def test_a_version_service_in_the_repo_has_a_worktree_of_its_own_and_a_case_one_the_cases(
    tmp_path: Path, script: Any
) -> None:
    checkout = tmp_path / "app"
    make_checkout(checkout)
    before = snapshot(checkout)
    topologies = Topologies(runtime(tmp_path, repos={"acme/app": str(checkout)}), idle_s=60)
    repo = {"name": "acme/app", "ref": "head"}
    in_repo = web(cwd="repo")
    fetch = script(
        """
        import os, sys, urllib.request
        for url in sys.argv[1:]:
            print(urllib.request.urlopen(url + "/src/app.py", timeout=5).read().decode().strip())
        """
    )
    command = [*fetch, "{service.shared.url}", "{service.own.url}"]
    job = service_job(
        {"shared": in_repo, "own": {**in_repo, "scope": "case"}}, command=command, repo=repo
    )
    case = CaseContext(held(job))

    async def main() -> None:
        runtime = topologies.runtime
        repo_stage = Repo(runtime.worktrees, runtime.repos, max_diff_bytes=lambda: 1 << 20)
        await Pipeline([Prepare(), repo_stage, Services(topologies), Execute(), Collect()]).run(
            case
        )
        shared = topologies.warm()[0]
        assert shared.places.worktree is not None
        assert shared.places.worktree.path.parent.name.startswith("everdict-service-")
        assert len(worktree_paths(checkout)) == 1  # the case's own went with the case
        await topologies.close()

    asyncio.run(main())
    assert case.ending is None and case.result is not None, case.ending
    # Both at HEAD's commit: the member's uncommitted `print(2)` is in neither.
    assert case.result.output.split() == ["print(1)", "print(1)"]
    assert worktree_paths(checkout) == []
    assert snapshot(checkout) == before


def test_docker_is_no_capability_while_no_daemon_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    capabilities = ["python", "docker"]
    presence = DockerPresence(capabilities, said.append)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    problem = asyncio.run(presence.check())
    assert capabilities == ["python"]
    assert problem is not None and "no Docker daemon answers at unix://" in problem


@pytest.mark.docker
def test_docker_is_a_capability_again_once_a_daemon_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    said: list[str] = []
    capabilities = ["python", "docker"]
    presence = DockerPresence(capabilities, said.append)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    assert asyncio.run(presence.check()) is not None and capabilities == ["python"]
    monkeypatch.undo()  # the daemon `make test` starts answers again
    assert asyncio.run(presence.check()) is None
    assert capabilities == ["python", "docker"]
    assert said[-1] == "Docker daemon answers: capability docker"


# A service that says it began, then is ready (listens) only once the test opens its gate.
GATED = """
    import http.server, os, pathlib, sys, time
    gate, me = pathlib.Path(os.environ["GATE"]), os.environ["V"]
    (gate / f"began-{me}").touch()
    while not (gate / f"open-{me}").exists():
        time.sleep(0.02)
    handler = http.server.SimpleHTTPRequestHandler
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), handler).serve_forever()
"""


async def until(check: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("max_starts", [1, 3])
def test_starts_are_bounded_so_a_burst_does_not_start_everything_at_once(
    tmp_path: Path, max_starts: int
) -> None:
    """How far apart the starts are is measured in bench/services.py; here, how many start
    at once: each service is ready only when the test opens its gate."""
    gate = tmp_path / "gate"
    gate.mkdir()
    topologies = Topologies(runtime(tmp_path, max_starts=max_starts), idle_s=60)
    jobs = [
        service_job({"api": script_service(tmp_path, GATED, env={"V": str(n), "GATE": str(gate)})})
        for n in range(3)
    ]

    def began() -> list[str]:
        return sorted(path.name.removeprefix("began-") for path in gate.glob("began-*"))

    def spawned() -> int:
        return len(topologies.runtime.records.all())

    async def main() -> list[int]:
        burst = asyncio.gather(*(topologies.acquire(job) for job in jobs))
        starting_at_once: list[int] = []
        opened: list[str] = []
        while len(opened) < len(jobs):
            # Wait until as many have begun as the bound lets start beside the ready ones;
            # by then the event loop has spawned every start it let through (in far less
            # time than a child takes to say it began).
            await until(lambda: len(began()) >= min(len(opened) + max_starts, len(jobs)))
            starting_at_once.append(spawned() - len(opened))
            for name in began():
                if name not in opened:
                    (gate / f"open-{name}").touch()
                    opened.append(name)
        got = await burst
        assert len({id(topology) for topology in got}) == len(jobs)
        await topologies.close()
        return starting_at_once

    starting_at_once = asyncio.run(main())
    assert starting_at_once == ([1, 1, 1] if max_starts == 1 else [3])


def test_the_stage_says_no_docker_daemon_and_ends_the_case_as_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-such.sock")
    topologies = Topologies(runtime(tmp_path))
    container = {"image": "postgres:16", "ports": [5432], "ready": {"tcp": 5432}}
    case = CaseContext(held(service_job({"db": container})))
    said: list[str] = []

    async def main() -> None:
        stages = [Prepare(), Services(topologies, no_docker=said.append), Execute(), Collect()]
        await Pipeline(stages).run(case)

    asyncio.run(main())
    assert isinstance(case.ending, Failed) and case.ending.verb == "error"
    assert case.ending.summary.startswith("service db needs Docker: no Docker daemon answers")
    assert said == [case.ending.summary]
    assert case.outcome is None  # the harness never started
