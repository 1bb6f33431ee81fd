"""Two replicas over one PostgreSQL and one Redis behave as one server.

Two daphne processes on two ports share the test database and a Redis database: a runner
long-polling replica A gets a job dispatched through replica B's REST API by the
cross-process wake-up (PostgreSQL NOTIFY); the status line and presence a runner reports
through A are what B shows; and a runner session whose requests a balancer spreads over
both replicas works without affinity (the MCP endpoint is stateless). Parked polls
re-check the queue only every RECHECK_S seconds here, so a job arriving in time proves
the notification carried it.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from cluster import DEFAULT_REDIS, Cluster, ok
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from accounts.services import api_key_create
from runnercli.client import RunnerClient
from runnercli.protocol import CaseResult
from runners.services import runner_pair
from tests.live import ParkedPolls, require_postgres_and_redis
from tests.suites import start, suite

pytestmark = [pytest.mark.e2e, pytest.mark.postgres_only, pytest.mark.django_db(transaction=True)]

REDIS_URL = f"{DEFAULT_REDIS}/5"
# Far longer than the wake this file asserts: only a notification can deliver the job in time.
RECHECK_S = 10
WAKE_WITHIN_S = 2.0


@pytest.fixture(scope="module")
def replicas(
    django_db_setup: Any, django_db_blocker: Any, tmp_path_factory: Any
) -> Iterator[Cluster]:
    # Two servers per module: they hold no state between tests that matters (each test's
    # rows are flushed; ids never repeat; status lines are unique per test).
    require_postgres_and_redis(REDIS_URL)
    workdir: Path = tmp_path_factory.mktemp("replicas")
    env = {"REDIS_URL": REDIS_URL, "EVERDICT_WAKE_RECHECK_S": RECHECK_S}
    with (
        django_db_blocker.unblock(),
        Cluster(workdir, replicas=2, schedulers=0, env=env) as cluster,
    ):
        yield cluster


@pytest.fixture
def cluster(replicas: Cluster, transactional_db: Any) -> Cluster:
    return replicas


def test_a_runner_long_polling_replica_a_gets_a_job_dispatched_through_replica_b(
    cluster: Cluster, alice: Any, workspace: Any
) -> None:
    a, b = (replica.url for replica in cluster.replicas)
    suite(alice, cases=1)
    paired = runner_pair(owner=alice, label="laptop", capabilities=["python"])
    key = api_key_create(user=alice, name="replicas").key

    async def scenario() -> tuple[float, Any, int]:
        async with RunnerClient(a, paired.token, max_wait_ms=20_000) as runner:
            # The first poll starts replica A's LISTEN connection; the queue is empty.
            first = await runner.lease_job(wait_ms=0, capabilities=["python"], status="idle")
            assert first.job is None
            await asyncio.sleep(0.5)
            parking = await asyncio.to_thread(ParkedPolls, a)
            poll = asyncio.create_task(
                runner.lease_job(wait_ms=20_000, capabilities=["python"], status="idle")
            )
            # Parked on A, its first round empty: only a wake-up can bring it the job.
            await asyncio.to_thread(parking.wait)
            assert not poll.done()
            run = await asyncio.to_thread(
                ok,
                b,
                "POST",
                "/api/workspaces/acme/runs",
                key,
                {"harness": "echo", "dataset": "echo", "runtime": f"self:{paired.runner.pk}"},
            )
            dispatched = time.monotonic()
            reply = await poll
            waited = time.monotonic() - dispatched
            assert reply.job is not None and reply.lease is not None
            ack = await runner.submit_job_result(
                job_id=reply.job.job_id,
                lease_epoch=reply.lease.lease_epoch,
                result=CaseResult(status="completed", exit_code=0, output="hello 0\n"),
            )
            assert ack.accepted, ack
            return waited, reply.job, int(run["id"])

    waited, job, run_id = asyncio.run(scenario())
    assert job.run_id == run_id
    assert job.case.key == "c0"
    assert waited < WAKE_WITHIN_S, f"the job reached replica A's poll {waited:.2f}s after dispatch"
    # The result sent through A is the run B reports.
    run = ok(b, "GET", f"/api/runs/{run_id}", key)
    assert run["status"] == "succeeded", run
    assert [r["verdict"] for r in run["results"]] == ["pass"]


def test_the_status_line_and_presence_reported_through_replica_a_show_on_replica_b(
    cluster: Cluster, alice: Any
) -> None:
    a, b = (replica.url for replica in cluster.replicas)
    paired = runner_pair(owner=alice, label="laptop", capabilities=["python"])
    key = api_key_create(user=alice, name="replicas").key

    def listed() -> dict[str, Any]:
        rows = ok(b, "GET", "/api/runners", key)
        return next(r for r in rows if r["id"] == paired.runner.pk)

    before = listed()
    assert before["online"] is False
    assert not before["status"]

    greeting = f"idle {uuid.uuid4().hex[:8]}"
    polling = f"last job failed: exit 3 ({uuid.uuid4().hex[:8]})"

    async def report() -> None:
        async with RunnerClient(a, paired.token) as runner:
            await runner.hello(capabilities=["python"], status=greeting)
            seen = await asyncio.to_thread(listed)
            assert (seen["online"], seen["status"]) == (True, greeting)
            await runner.lease_job(wait_ms=0, capabilities=["python"], status=polling)

    asyncio.run(report())
    after = listed()
    assert after["online"] is True
    assert after["status"] == polling
    # And A, which took the report, shows the same.
    mine = next(r for r in ok(a, "GET", "/api/runners", key) if r["id"] == paired.runner.pk)
    assert (mine["online"], mine["status"]) == (True, polling)


def test_one_runner_session_spread_over_both_replicas_needs_no_sticky_sessions(
    cluster: Cluster, alice: Any, workspace: Any
) -> None:
    replicas = [replica.port for replica in cluster.replicas]
    suite(alice, cases=1)
    paired = runner_pair(owner=alice, label="laptop", capabilities=["python"])
    run = start(alice, paired.runner)
    sent_to: list[int] = []

    async def round_robin(request: httpx2.Request) -> None:
        # A load balancer without affinity: each HTTP request goes to the next replica.
        port = replicas[len(sent_to) % len(replicas)]
        sent_to.append(port)
        request.url = request.url.copy_with(port=port)

    async def scenario() -> dict[str, Any]:
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {paired.token}"},
            timeout=httpx2.Timeout(10, read=30),
            event_hooks={"request": [round_robin]},
        )
        url = f"{cluster.replicas[0].url}/mcp"
        async with http, Client(streamable_http_client(url, http_client=http)) as client:
            leased = await call(client, "lease_job", protocol=2, wait_ms=5000, status="idle")
            job, lease = leased["job"], leased["lease"]
            epoch = {"job_id": job["job_id"], "lease_epoch": lease["lease_epoch"]}
            assert (await call(client, "heartbeat_job", **epoch))["accepted"]
            assert (await call(client, "report_case_log", **epoch, lines=["hi"]))["accepted"]
            result = {"status": "completed", "exit_code": 0, "output": "hello 0\n"}
            return await call(client, "submit_job_result", **epoch, result=result)

    ack = asyncio.run(scenario())
    assert ack == {"accepted": True, "reason": ""}
    assert set(sent_to) == set(replicas)
    run.refresh_from_db()
    assert run.status == "succeeded"


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content
