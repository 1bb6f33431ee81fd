"""The runner's result sender against a real server.

Results that become ready while a submit is in flight go together in the next call, one
`submit_job_results`; each case still gets its own ack. The server settles every job of one
call at one instant, so the jobs' `finished_at` tell which results travelled together.
A server of an earlier release, which knows only `submit_job_result`, gets single submits.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer

from runnercli.case.delivery.batches import ResultSender
from runnercli.client import RunnerClient
from runnercli.protocol import Ack, CaseResult, LeaseGrant, ResultReport
from runners.models import JobStatus, RunnerJob
from runners.services import runner_pair
from tests.live import free_port
from tests.suites import completed, start, suite

pytestmark = pytest.mark.e2e


async def lease(client: RunnerClient, count: int) -> list[LeaseGrant]:
    grants: list[LeaseGrant] = []
    while len(grants) < count:
        reply = await client.lease_job(
            wait_ms=2000, capabilities=["python"], status="busy", max_jobs=count - len(grants)
        )
        grants += reply.grants()
    return grants


def report(grant: LeaseGrant, *, lease_epoch: int | None = None) -> ResultReport:
    """The right answer of an echo case (`c3` expects `hello 3`)."""
    return ResultReport(
        job_id=grant.job.job_id,
        lease_epoch=grant.lease.lease_epoch if lease_epoch is None else lease_epoch,
        result=completed(f"hello {grant.job.case.key[1:]}\n"),
    )


async def sending(sender: ResultSender) -> None:
    """Wait until a call is in flight."""
    async with asyncio.timeout(10):
        while not sender.in_flight:
            await asyncio.sleep(0)


def queued_run(user: Any, cases: int) -> tuple[Any, Any]:
    """A paired runner and a run of `cases` cases, every one of them queued for it."""
    suite(user, cases=cases)
    paired = runner_pair(owner=user, label="laptop", capabilities=["python"])
    return paired, start(user, paired.runner, concurrency=cases)


def settled_at(run_id: int) -> dict[str, Any]:
    jobs = RunnerJob.objects.filter(run_id=run_id)
    return {job.case_key: job.finished_at for job in jobs}


@pytest.mark.django_db(transaction=True)
def test_results_ready_while_a_submit_is_in_flight_go_together_in_the_next_call(
    daphne_server: Any, alice: Any, workspace: Any
) -> None:
    paired, run = queued_run(alice, cases=4)

    async def scenario() -> tuple[list[Ack], str, int]:
        async with RunnerClient(daphne_server.url, paired.token) as client:
            grants = await lease(client, 4)
            sender = ResultSender(client)
            first = asyncio.create_task(sender.submit(report(grants[0])))
            await sending(sender)
            rest = [asyncio.create_task(sender.submit(report(g))) for g in grants[1:]]
            acks = await asyncio.gather(first, *rest)
            return acks, grants[0].job.case.key, sender.in_flight

    acks, alone, in_flight = asyncio.run(scenario())
    assert [ack.accepted for ack in acks] == [True] * 4, acks
    assert in_flight == 0
    finished = settled_at(run.pk)
    together = {at for key, at in finished.items() if key != alone}
    assert len(together) == 1, finished  # the three that queued went in one call
    assert finished[alone] not in together  # the first went at once, alone
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert sorted(run.results.values_list("verdict", flat=True)) == ["pass"] * 4


@pytest.mark.django_db(transaction=True)
def test_each_result_of_a_shared_call_gets_its_own_ack(
    daphne_server: Any, alice: Any, workspace: Any
) -> None:
    paired, run = queued_run(alice, cases=3)

    async def scenario() -> tuple[list[Ack], list[str]]:
        async with RunnerClient(daphne_server.url, paired.token) as client:
            a, b, c = await lease(client, 3)
            sender = ResultSender(client)
            stale = report(b, lease_epoch=b.lease.lease_epoch + 1)
            acks = await asyncio.gather(
                sender.submit(report(a)), sender.submit(stale), sender.submit(report(c))
            )
            return list(acks), [g.job.case.key for g in (a, b, c)]

    acks, (a, b, c) = asyncio.run(scenario())
    assert [ack.accepted for ack in acks] == [True, False, True]
    assert acks[1].reason.startswith("stale lease"), acks[1]
    finished = settled_at(run.pk)
    assert finished[a] == finished[c] is not None  # one call
    assert RunnerJob.objects.get(run=run, case_key=b).status == JobStatus.LEASED


@asynccontextmanager
async def earlier_server(received: list[int]) -> AsyncIterator[str]:
    """An MCP server of an earlier release: it knows `submit_job_result`, not the batch."""
    server: MCPServer = MCPServer("everdict")

    async def submit_job_result(job_id: int, lease_epoch: int, result: CaseResult) -> Ack:
        await asyncio.sleep(0.05)  # long enough for results to queue behind the call
        received.append(job_id)
        return Ack(accepted=True)

    server.add_tool(submit_job_result)
    app = server.streamable_http_app(stateless_http=True)
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    http = uvicorn.Server(config)
    serving = asyncio.create_task(http.serve())
    try:
        async with asyncio.timeout(10):
            while not http.started:
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        http.should_exit = True
        await serving


def test_a_server_without_the_batch_tool_gets_single_submits_from_then_on() -> None:
    received: list[int] = []

    def result(job_id: int) -> ResultReport:
        return ResultReport(job_id=job_id, lease_epoch=1, result=completed("ok"))

    async def scenario() -> tuple[list[Ack], bool, int]:
        async with earlier_server(received) as url, RunnerClient(url, "rnr_test") as client:
            sender = ResultSender(client)
            first = asyncio.create_task(sender.submit(result(1)))
            await sending(sender)
            queued = [asyncio.create_task(sender.submit(result(n))) for n in (2, 3)]
            acks = await asyncio.gather(first, *queued)
            # Batching is off for good: these go at once, each in a call of its own.
            acks += await asyncio.gather(*(sender.submit(result(n)) for n in (4, 5, 6)))
            return list(acks), sender.batches, sender.in_flight

    acks, batches, in_flight = asyncio.run(scenario())
    assert [ack.accepted for ack in acks] == [True] * 6
    assert batches is False
    assert in_flight == 0
    assert sorted(received) == [1, 2, 3, 4, 5, 6]  # each once
