"""The leaser: it leases for the free slots, runs each grant in a task of its own, hands
back what arrives while the runner stops, and with `--once` stops after one job."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from runnercli.case.consent.settings import ConsentSettings
from runnercli.client.grants import LeaseBatch
from runnercli.commands.loop import RunnerLoop
from runnercli.console.exits import EXIT_NOT_REPORTED
from runnercli.protocol import Ack, CaseJob, Lease, LeaseGrant
from tests.runnercli.conftest import make_job
from tests.runnercli.fakes import FakeClient, fake_client, fake_runner, said

Script = Callable[[str], list[str]]


def grant(job: CaseJob, job_id: int) -> LeaseGrant:
    job = job.model_copy(update={"job_id": job_id})
    lease = Lease(job_id=job_id, lease_epoch=1, lease_ttl_ms=60_000, heartbeat_ms=20_000)
    return LeaseGrant(job=job, lease=lease)


def runner(client: FakeClient, **options: object) -> RunnerLoop:
    return fake_runner(client, consent=ConsentSettings(allow_any=True), **options)


def test_it_leases_for_every_free_slot_and_runs_each_grant(script: Script) -> None:
    client = FakeClient()
    job = make_job(script("print('ok')"))
    client.answer("lease_job", LeaseBatch(granted=[grant(job, 1), grant(job, 2)]))
    loop = runner(client, max_concurrent=3)

    def sent() -> list[int]:
        batches = [r.job_id for call in client.of("submit_job_results") for r in call["reports"]]
        return sorted(batches + [call["job_id"] for call in client.of("submit_job_result")])

    async def until_reported() -> None:
        leasing = asyncio.create_task(loop.leaser.run())
        async with asyncio.timeout(20):
            while len(sent()) < 2:
                await asyncio.sleep(0.02)
        loop.session.stop.set()
        await asyncio.wait_for(leasing, 10)

    asyncio.run(until_reported())
    assert client.of("lease_job")[0]["max_jobs"] == 3
    assert sent() == [1, 2]


def test_a_grant_arriving_while_the_runner_stops_is_handed_back(script: Script) -> None:
    client = FakeClient()
    loop = runner(client)

    async def stopping_while_leasing() -> None:
        # The grant arrives in the call in flight when the member stops the runner.
        client.answer("lease_job", LeaseBatch(granted=[grant(make_job(script("")), 7)]))
        loop.session.stop.set()
        await loop.leaser.take(await client.lease_job(wait_ms=0, capabilities=[], status=""))

    asyncio.run(stopping_while_leasing())
    (release,) = client.of("release_job")
    assert (release["job_id"], release["reason"]) == (7, "the runner is stopping")


def test_once_it_runs_one_job_and_stops_saying_whether_it_was_reported(script: Script) -> None:
    client = FakeClient()
    job = make_job(script("print('ok')"))
    client.answer("lease_job", LeaseBatch(granted=[grant(job, 1)]))
    client.answer("submit_job_result", Ack(accepted=False, reason="stale lease"))
    loop = runner(client, once=True)
    asyncio.run(asyncio.wait_for(loop.leaser.run(), 20))
    assert loop.session.stop.is_set()
    assert loop.session.exit_code == EXIT_NOT_REPORTED
    assert len(fake_client(loop.session).of("lease_job")) == 1
    assert "result refused: stale lease" in said(loop.session)
