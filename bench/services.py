"""Service harnesses: what a warm topology adds to a case's start, and what a topology's cold
start costs beside a plain `docker run` of the same image, in the same run.

Warm: N cases of a tiny harness (`/bin/true`) through the runner's own case pipeline
(`Prepare`, `Execute`, `Collect`), beside the same N with the `Services` stage in front of
`Execute` holding a warm topology (a container service when Docker answers, else a process
service): the median added per case. Target: within 50 ms.

Cold: a topology of one container service (busybox `httpd`, made here: nothing is pulled)
started until its HTTP probe answers, then stopped, beside `docker run -d -p 127.0.0.1::8080`
of the same image polled until it answers the same request, then removed; medians of R.
Without a Docker daemon the cold rows are left out, said in a note.

Burst: three topologies acquired at once, each a process service that takes 0.8 s to listen,
under `--max-service-starts 1` (each start waits for the one before to be ready) beside 3
(all at once): the spread from the first service's start to the last's, medians of R.

    .venv/bin/python bench/services.py [--cases 200] [--repeat 5]

It uses no database: `--sqlite` / `--postgres` (as `run_all.py` passes them) are accepted.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil
from databases import ROOT, add_database_arguments
from report import Summary, finish

sys.path.insert(0, str(ROOT))

from everdict.demo_image import HTTPD, busybox_image
from runnercli.case.collect import Collect
from runnercli.case.execute import Execute
from runnercli.case.pipeline import CaseContext, Pipeline, Stage
from runnercli.case.prepare import Prepare
from runnercli.case.services import Records, Runtime, Topologies
from runnercli.case.services.daemon import daemon_problem
from runnercli.case.services.stage import Services
from runnercli.protocol import CaseJob, HarnessSpec, Lease, harness_digest
from runnercli.session import JobRun

IMAGE = "everdict-bench/busybox:1"
PAGE = "bench\n"
TARGET_MS = 50.0
HTTP_SERVER = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "{port}"]


def job(services: dict[str, Any] | None, job_id: int = 1) -> CaseJob:
    given: dict[str, Any] = {"command": ["/bin/true"], "timeout_s": 60}
    if services is not None:
        given["services"] = services
    spec = HarnessSpec.model_validate(given)
    return CaseJob.model_validate(
        {
            "job_id": job_id,
            "attempt_id": job_id,
            "lease_epoch": 1,
            "run_id": 1,
            "workspace": "bench",
            "submitted_by": "bench",
            "case": {"key": f"c{job_id}", "input": {}},
            "harness": {
                "name": "bench",
                "version": 1,
                "digest": harness_digest(spec),
                "author": "bench",
                "spec": spec.model_dump(mode="json"),
            },
            "capabilities": [],
            "timeout_s": 60,
        }
    )


def container(image: str) -> dict[str, Any]:
    ready = {"http": "/", "port": 8080, "timeout_s": 60}
    return {"image": image, "command": HTTPD, "ports": [8080], "ready": ready}


async def one_case(case_job: CaseJob, before_execute: list[Stage]) -> float:
    lease = Lease(job_id=case_job.job_id, lease_epoch=1, lease_ttl_ms=0, heartbeat_ms=0)
    case = CaseContext(JobRun(case_job, lease))
    began = time.perf_counter()
    await Pipeline([Prepare(), *before_execute, Execute(), Collect()]).run(case)
    assert case.ending is None and case.result is not None, case.ending
    return (time.perf_counter() - began) * 1000


async def warm_rows(cases: int, services: dict[str, Any], tmp: Path) -> tuple[float, float]:
    """(median ms per case without services, median ms with the warm topology)."""
    topologies = Topologies(Runtime(Records(tmp / "records"), tmp_root=tmp), idle_s=600)
    with_services = job(services)
    await topologies.acquire(with_services)  # warm it up; released at close
    plain = job(None)
    try:
        bare, warm = [], []
        for _ in range(cases):  # interleaved, so drift of the machine hits both alike
            bare.append(await one_case(plain, []))
            warm.append(await one_case(with_services, [Services(topologies)]))
    finally:
        await topologies.close()
    return statistics.median(bare), statistics.median(warm)


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as reply:
            return reply.status == 200
    except OSError:
        return False


def plain_docker_run(image: str) -> float:
    began = time.perf_counter()
    started = subprocess.run(
        ["docker", "run", "-d", "--init", "-p", "127.0.0.1::8080", image, *HTTPD],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    container_id = started.stdout.strip()
    try:
        port = (
            subprocess.run(
                ["docker", "port", container_id, "8080"], capture_output=True, text=True, check=True
            )
            .stdout.split(":")[-1]
            .strip()
        )
        while not answers(f"http://127.0.0.1:{port}/"):
            time.sleep(0.01)
        return (time.perf_counter() - began) * 1000
    finally:
        subprocess.run(["docker", "rm", "-f", container_id], capture_output=True, check=False)


# A process service that takes READY_S to listen: a start holds its slot that long.
SLOW_TO_LISTEN = [
    sys.executable,
    "-c",
    "import http.server, sys, time; time.sleep(float(sys.argv[2]));"
    " http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])),"
    " http.server.SimpleHTTPRequestHandler).serve_forever()",
    "{port}",
]
READY_S = 0.8
BURST = 3


async def burst_spread(tmp: Path, max_starts: int) -> float:
    """Seconds from the first to the last service process started, BURST topologies (each
    slow to listen) acquired at once under `--max-service-starts max_starts`."""
    runtime = Runtime(Records(tmp / f"records-{max_starts}"), tmp_root=tmp, max_starts=max_starts)
    topologies = Topologies(runtime, idle_s=600)
    run = [*SLOW_TO_LISTEN, str(READY_S)]
    jobs = [
        job({"api": {"run": run, "env": {"V": str(n)}, "ready": {"http": "/"}}}, job_id=2000 + n)
        for n in range(BURST)
    ]
    got = await asyncio.gather(*(topologies.acquire(case_job) for case_job in jobs))
    began = sorted(psutil.Process(t.services["api"].record.pid).create_time() for t in got)  # type: ignore[attr-defined]
    await topologies.close()
    return began[-1] - began[0]


async def topology_cold_start(image: str, tmp: Path, n: int) -> float:
    topologies = Topologies(Runtime(Records(tmp / "records"), tmp_root=tmp), idle_s=600)
    case_job = job({"web": container(image)}, job_id=1000 + n)
    began = time.perf_counter()
    topology = await topologies.acquire(case_job)
    took = (time.perf_counter() - began) * 1000
    topologies.release(case_job, topology)
    await topologies.close()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=200, help="cases per warm measurement")
    parser.add_argument("--repeat", type=int, default=5, help="cold starts of each kind")
    add_database_arguments(parser)
    args = parser.parse_args()
    summary = Summary("service harnesses: a warm topology's cost per case, a cold start")
    problem = asyncio.run(daemon_problem())
    with tempfile.TemporaryDirectory(prefix="everdict-bench-services-") as scratch:
        tmp = Path(scratch)
        if problem is None:
            image = busybox_image(IMAGE, PAGE)
            services, kind = {"web": container(image)}, "container"
        else:
            services = {"web": {"run": HTTP_SERVER, "ready": {"http": "/"}}}
            kind = "process"
            summary.notes.append(
                f"no Docker daemon ({problem}): the warm rows use a process service, no cold rows"
            )
        bare, warm = asyncio.run(warm_rows(args.cases, services, tmp))
        added = warm - bare
        summary.add(
            benchmark="services",
            figure=f"case start with a warm {kind} topology, added (median of {args.cases})",
            value=f"{added:.1f} ms",
            baseline=f"{bare:.1f} ms per case without services",
            ratio=f"{warm / bare:.2f}x" if bare else "-",
            target=f"<= {TARGET_MS:.0f} ms",
            met=added <= TARGET_MS,
        )
        serial = statistics.median(asyncio.run(burst_spread(tmp, 1)) for _ in range(args.repeat))
        at_once = statistics.median(
            asyncio.run(burst_spread(tmp, BURST)) for _ in range(args.repeat)
        )
        summary.add(
            benchmark="services",
            figure=f"{BURST} topologies at once, one start at a time: first to last start",
            value=f"{serial:.2f} s",
            baseline=f"{at_once:.2f} s with {BURST} starts at once",
            ratio=f"{serial / at_once:.1f}x" if at_once else "-",
            # Each start waits for the one before to be ready (READY_S); all at once, none.
            target=f">= {(BURST - 1) * READY_S * 0.9:.2f} s, baseline < {READY_S:.1f} s",
            met=serial >= (BURST - 1) * READY_S * 0.9 and at_once < READY_S,
        )
        if problem is None:
            cold = [asyncio.run(topology_cold_start(image, tmp, n)) for n in range(args.repeat)]
            plain = [plain_docker_run(image) for _ in range(args.repeat)]
            summary.add(
                benchmark="services",
                figure=f"topology cold start to ready (median of {args.repeat})",
                value=f"{statistics.median(cold):.0f} ms",
                baseline=f"{statistics.median(plain):.0f} ms plain docker run to answering",
                ratio=f"{statistics.median(cold) / statistics.median(plain):.2f}x",
                target="-",
            )
    finish(summary, args)


if __name__ == "__main__":
    main()
