"""The session: what the runner says about itself, and how it stops (drain, then abort), or
dies with every case it holds."""

from __future__ import annotations

import asyncio

from runnercli.console.exits import EXIT_REVOKED, RunnerExit
from tests.runnercli.conftest import make_job
from tests.runnercli.fakes import fake_runner, fake_session, held, said


def test_the_status_says_what_the_runner_is_doing() -> None:
    session = fake_session()
    assert session.status_text() == "idle"
    session.last_failure = "exit 3"
    assert session.status_text() == "last job failed: exit 3"
    session.running = {1: held(make_job(["a"])), 2: held(make_job(["b"]))}
    assert session.status_text() == "running 2 jobs"
    assert session.words(paused="paused: rate-limited until 15:04") == (
        "running 2 jobs; paused: rate-limited until 15:04"
    )
    session.stop.set()
    assert session.status_text() == "draining, running 2 jobs"


def test_the_runner_s_status_puts_a_question_to_the_member_first() -> None:
    runner = fake_runner()
    runner.consent.waiting.append("acme/echo@3")
    assert runner.status_text() == "waiting for consent on acme/echo@3"
    runner.consent.waiting.clear()
    runner.pauses.paused_until, runner.pauses.reason = 4e9, "rate-limited"
    assert runner.status_text().startswith("paused: rate-limited until ")


def test_the_first_stop_drains_and_the_second_hands_every_case_back() -> None:
    session = fake_session()
    job_run = held(make_job(["a"]))
    session.running = {1: job_run}
    session.request_stop()
    assert session.stop.is_set() and not job_run.kill.is_set()
    assert "stopping: finishing 1 running case(s)" in said(session)
    session.request_stop()
    assert session.abort.is_set()
    assert job_run.abandoned and job_run.kill.is_set()


def test_a_fatal_exit_ends_every_case_held_and_the_first_one_stands() -> None:
    session = fake_session()
    job_run = held(make_job(["a"]))
    session.running = {1: job_run}
    session.die(RunnerExit(EXIT_REVOKED, "this runner was revoked — pair again"))
    assert job_run.kill.is_set() and job_run.lost_reason == "this runner was revoked — pair again"
    assert session.fatal_event.is_set()
    session.die(RunnerExit(1, "later"))
    assert session.fatal is not None and session.fatal.code == EXIT_REVOKED


def test_a_pause_waits_a_backoff_delay_cut_short_by_a_stop() -> None:
    session = fake_session()

    async def paused() -> None:
        session.stop.set()
        await asyncio.wait_for(session.pause("cannot reach server"), 1)

    asyncio.run(paused())
    assert "status: cannot reach server, retrying in " in said(session)
