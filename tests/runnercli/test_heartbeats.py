"""Heartbeats: a lease the server took back ends the case here; one it cannot confirm goes on;
on waking from a sleep every case held is heartbeaten before leasing again."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable

from runnercli.case import run_case
from runnercli.case.heartbeats import Heartbeats
from runnercli.client import RevokedError, ServerUnavailable
from runnercli.console.exits import EXIT_REVOKED
from runnercli.protocol import CaseJob, CaseResult, HeartbeatAck, Lease
from runnercli.session import JobRun
from tests.runnercli.conftest import make_job
from tests.runnercli.fakes import fake_client, fake_session, held, said

Script = Callable[[str], list[str]]
LONG = [sys.executable, "-c", "import time; time.sleep(60)"]


def job(job_id: int = 1, command: list[str] | None = None) -> CaseJob:
    return make_job(command or LONG, timeout_s=60).model_copy(update={"job_id": job_id})


async def beating_while_it_runs(parts: Heartbeats, job_run: JobRun) -> CaseResult:
    """The case runs with its heartbeat, as a job's does."""
    heartbeat = asyncio.create_task(parts.keep(job_run))
    try:
        return await run_case(job_run.job, on_stderr_line=lambda _: None, kill=job_run.kill)
    finally:
        heartbeat.cancel()


def test_a_heartbeat_that_finds_the_lease_lost_ends_the_case_here() -> None:
    session = fake_session()
    lost = HeartbeatAck(accepted=False, reason="stale lease: epoch 1 (now 2)")
    fake_client(session).answer("heartbeat_job", lost)
    job_run = held(job(), heartbeat_ms=100)
    started = time.monotonic()
    result = asyncio.run(beating_while_it_runs(Heartbeats(session), job_run))
    assert time.monotonic() - started < 10
    assert result.status == "canceled"
    assert job_run.lost_reason == "stale lease: epoch 1 (now 2)"
    assert not job_run.canceled


def test_a_canceled_job_is_ended_and_known_as_canceled() -> None:
    session = fake_session()
    canceled = HeartbeatAck(accepted=False, cancel=True, reason="canceled")
    fake_client(session).answer("heartbeat_job", canceled)
    job_run = held(job(), heartbeat_ms=100)
    result = asyncio.run(beating_while_it_runs(Heartbeats(session), job_run))
    assert result.status == "canceled"
    assert (job_run.canceled, job_run.lost_reason) == (True, "canceled")


def test_a_heartbeat_the_server_cannot_answer_leaves_the_case_running() -> None:
    session = fake_session()
    client = fake_client(session)
    client.answer("heartbeat_job", ServerUnavailable("refused"), ServerUnavailable("refused"))
    done = [sys.executable, "-c", "import time; time.sleep(0.8); print('done')"]
    job_run = held(job(command=done), heartbeat_ms=100)
    result = asyncio.run(beating_while_it_runs(Heartbeats(session), job_run))
    assert (result.status, result.output) == ("completed", "done\n")
    assert len(client.of("heartbeat_job")) >= 3  # it went on beating after the misses
    assert job_run.lost_reason is None


def test_a_revoked_runner_stops_whole_and_its_cases_with_it() -> None:
    session = fake_session()
    fake_client(session).answer("heartbeat_job", RevokedError("revoked"))
    job_run = held(job(), heartbeat_ms=100)
    session.running[1] = job_run
    result = asyncio.run(beating_while_it_runs(Heartbeats(session), job_run))
    assert result.status == "canceled"
    assert session.fatal is not None and session.fatal.code == EXIT_REVOKED
    assert session.fatal_event.is_set()


def test_on_waking_every_case_held_is_heartbeaten_before_leasing_again() -> None:
    session = fake_session()
    client = fake_client(session)
    client.answer(
        "heartbeat_job",
        HeartbeatAck(accepted=True, resumed=True),
        HeartbeatAck(accepted=False, reason="stale lease: epoch 1 (now 2)"),
    )
    first, second = held(job(1)), held(job(2))
    session.running = {1: first, 2: second}
    parts = Heartbeats(session)

    async def wake() -> bool:
        parts.woke(14 * 60)
        asleep = not parts.awake.is_set()  # leasing waits for the round
        await asyncio.wait_for(parts.awake.wait(), 10)
        return asleep

    assert asyncio.run(wake())
    assert [call["job_id"] for call in client.of("heartbeat_job")] == [1, 2]
    assert "slept 14 min — 1 case resumed, 1 taken by another runner" in said(session)
    assert not first.kill.is_set()
    assert second.kill.is_set() and second.lost_reason == "stale lease: epoch 1 (now 2)"


def test_a_job_leased_again_while_its_case_runs_here_goes_on_under_the_new_lease() -> None:
    session = fake_session()
    job_run = held(job(), epoch=1)
    Heartbeats(session).adopt(
        job_run, Lease(job_id=1, lease_epoch=2, lease_ttl_ms=60_000, heartbeat_ms=20_000)
    )
    assert job_run.epoch == 2
    assert "leased to this runner again while its case still runs here" in said(session)
