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


def test_beside_short_cases_it_leases_twice_as_many_again_ahead(script: Script) -> None:
    client = FakeClient()
    job = make_job(script("print('ok')"))
    # Two short cases, then two more: the leases after them ask for the slots and twice as
    # many again.
    client.answer("lease_job", LeaseBatch(granted=[grant(job, 1), grant(job, 2)]))
    client.answer("lease_job", LeaseBatch(granted=[grant(job, 3), grant(job, 4)]))
    loop = runner(client, max_concurrent=2)

    def reported() -> int:
        batches = [r for call in client.of("submit_job_results") for r in call["reports"]]
        return len(batches) + len(client.of("submit_job_result"))

    async def until_reported() -> None:
        leasing = asyncio.create_task(loop.leaser.run())
        async with asyncio.timeout(20):
            while reported() < 4 or client.of("lease_job")[-1]["max_jobs"] != 6:
                await asyncio.sleep(0.02)
        loop.session.stop.set()
        await asyncio.wait_for(leasing, 10)

    asyncio.run(until_reported())
    asked = [call["max_jobs"] or 1 for call in client.of("lease_job")]
    assert asked[0] == 2, asked  # no case has run yet: the free slots only
    # After two short cases: the free slots and twice as many again, never more.
    assert max(asked) == 6, asked


def test_a_job_leased_ahead_is_handed_back_when_the_runner_stops_before_its_turn(
    script: Script,
) -> None:
    client = FakeClient()
    loop = runner(client, max_concurrent=1)
    slots = loop.leaser.slots
    slots._recent.append(0.01)  # one short case ran: two jobs are leased ahead

    async def stopping_while_it_waits() -> None:
        long_case = make_job(script("import time; time.sleep(30)"))
        granted = [grant(long_case, job_id) for job_id in (1, 2, 3)]
        client.answer("lease_job", LeaseBatch(granted=granted))
        assert slots.leasable == 3
        tasks = await loop.leaser.take(
            await client.lease_job(wait_ms=0, capabilities=[], status="")
        )
        async with asyncio.timeout(10):
            while not any(run.started for run in loop.session.running.values()):
                await asyncio.sleep(0.01)
        for job_id in (2, 3):
            ahead = loop.session.running[job_id]
            assert (ahead.ahead, ahead.started) == (True, False)
        loop.session.stop.set()
        slots.wake()  # as the leaser does when it stops
        async with asyncio.timeout(10):
            while len(client.of("release_job")) < 2:
                await asyncio.sleep(0.01)
        loop.session.running[1].kill.set()
        loop.session.request_stop()
        await asyncio.wait(tasks, timeout=10)

    asyncio.run(stopping_while_it_waits())
    # Handed back at the first signal, before the running case was (at the second).
    first, second = client.of("release_job")[:2]
    assert {first["job_id"], second["job_id"]} == {2, 3}
    assert {first["reason"], second["reason"]} == {"the runner is stopping"}
