"""Plan-limit pauses: a rate-limited case goes back to the queue with the runner's pause, and
the runner leases nothing until the pause is over, telling the server why meanwhile."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

from runnercli.case.delivery.ratelimit import Pauses, RateLimited, clock
from runnercli.case.delivery.reports import Delivery
from tests.runnercli.conftest import make_job
from tests.runnercli.fakes import fake_client, fake_runner, fake_session, held, said


def test_a_rate_limited_case_is_handed_back_and_the_runner_pauses_until_then() -> None:
    session = fake_session()
    pauses = Pauses(session, Delivery(session))
    job_run = held(make_job(["claude"]), epoch=2)
    before = time.time()
    released = asyncio.run(pauses.release_rate_limited(job_run, RateLimited(120, "exit code 75")))
    assert released
    (release,) = fake_client(session).of("release_job")
    assert (release["job_id"], release["lease_epoch"]) == (1, 2)
    assert release["reason"] == "rate-limited (exit code 75)"
    paused_until = datetime.fromisoformat(release["until"]).timestamp()
    assert before + 119 <= paused_until <= time.time() + 121
    assert pauses.paused_until is not None and abs(pauses.paused_until - paused_until) < 1
    assert pauses.text() == f"paused: rate-limited until {clock(pauses.paused_until)}"
    assert "⏸ rate-limited (exit code 75): handed back; this runner pauses until" in said(session)


def test_a_later_pause_wins_and_a_pause_past_its_time_says_nothing() -> None:
    session = fake_session()
    pauses = Pauses(session, Delivery(session))
    pauses.paused_until, pauses.reason = time.time() - 1, "rate-limited"
    assert pauses.text() == ""


def test_a_pause_holds_leasing_until_its_time_and_says_why() -> None:
    runner = fake_runner()
    client, session = fake_client(runner.session), runner.session
    runner.pauses.paused_until = until = time.time() + 1.5
    runner.pauses.reason = "rate-limited"

    async def lease_once() -> float:
        leasing = asyncio.create_task(runner.leaser.run())
        while not client.of("lease_job"):
            await asyncio.sleep(0.01)
        leased_at = time.time()
        session.stop.set()
        await asyncio.wait_for(leasing, 10)
        return leased_at

    leased_at = asyncio.run(lease_once())
    assert leased_at >= until
    # The status line said why; the server heard from the runner during the pause.
    assert f"status: paused: rate-limited until {clock(until)}" in said(session)
    assert len(client.of("hello")) == 1
    assert runner.pauses.paused_until is None
    assert client.of("lease_job")[0]["status"] == "idle"


def test_a_stop_ends_the_pause_at_once() -> None:
    session = fake_session()
    pauses = Pauses(session, Delivery(session))
    pauses.paused_until, pauses.reason = time.time() + 600, "rate-limited"

    async def stopped() -> float:
        waiting = asyncio.create_task(pauses.wait_while_paused())
        await asyncio.sleep(0.1)
        started = time.monotonic()
        session.stop.set()
        await asyncio.wait_for(waiting, 10)
        return time.monotonic() - started

    assert asyncio.run(stopped()) < 5
