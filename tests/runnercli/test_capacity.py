"""`--max-concurrent N|auto` and the slots cases take: a case needing more slots than are
free waits for them, in turn, and nothing smaller is leased past it meanwhile."""

from __future__ import annotations

import asyncio
import os

import click
import pytest
from click.testing import CliRunner

from runnercli.session import JobRun
from runnercli.slots import MAX_CONCURRENT_TYPE, Slots, auto_concurrency, usable_cores
from tests.runnercli.conftest import make_job
from tests.runnercli.fakes import held


def test_auto_is_half_the_cores_and_at_least_one() -> None:
    assert [auto_concurrency(cores) for cores in (1, 2, 3, 8, 64)] == [1, 1, 1, 4, 32]
    assert usable_cores(None, lambda: 6) == 6
    assert usable_cores(lambda pid: {0, 3}, lambda: 64) == 2
    assert usable_cores(None, lambda: None) == 1


@pytest.mark.skipif(len(os.sched_getaffinity(0)) != 2, reason="this machine does not offer 2 cores")
def test_auto_on_this_two_core_machine_is_one() -> None:
    assert auto_concurrency() == 1


HALF_THE_CORES = max(1, len(os.sched_getaffinity(0)) // 2)


@click.command()
@click.option("--max-concurrent", type=MAX_CONCURRENT_TYPE, default="1")
def probe(max_concurrent: int) -> None:
    click.echo(repr(max_concurrent))


@pytest.mark.parametrize(
    ("given", "read"),
    # `auto`: half the cores this process may run on, at least 1.
    [("auto", repr(HALF_THE_CORES)), ("AUTO", repr(HALF_THE_CORES)), ("3", "3")],
)
def test_max_concurrent_takes_a_number_or_auto(given: str, read: str) -> None:
    done = CliRunner().invoke(probe, ["--max-concurrent", given])
    assert (done.exit_code, done.output) == (0, read + "\n")


@pytest.mark.parametrize("given", ["0", "-1", "65", "two", ""])
def test_max_concurrent_refuses_anything_else(given: str) -> None:
    done = CliRunner().invoke(probe, ["--max-concurrent", given])
    assert done.exit_code == 2
    assert "Invalid value for '--max-concurrent'" in done.output


def sized(slots: int | None, job_id: int = 1) -> JobRun:
    """A leased job whose harness asks for `slots` of `--max-concurrent`."""
    job = make_job(["true"])
    spec = job.harness.spec.model_copy(update={"slots": slots})
    harness = job.harness.model_copy(update={"spec": spec})
    return held(job.model_copy(update={"job_id": job_id, "harness": harness}))


def test_a_case_takes_its_harnesss_slots_and_never_more_than_the_machine_has() -> None:
    slots = Slots(2)
    assert [slots.need(sized(n)) for n in (None, 1, 2, 5)] == [1, 1, 2, 2]
    one = slots.take(sized(1))
    assert (one.holds_slot, one.slots, slots.free) == (True, 1, 1)
    two = slots.take(sized(2, job_id=2))
    assert (two.slots, slots.free) == (2, 0)
    slots.give_back(one)
    slots.give_back(one)  # given back once only
    assert slots.free == 0
    slots.give_back(two)
    assert (slots.used, slots.free) == (0, 2)


def test_a_two_slot_case_waits_and_nothing_is_leased_past_it() -> None:
    async def scenario() -> list[str]:
        slots, order = Slots(2), []
        small = slots.take(sized(1))
        await slots.start(small)  # a one-slot case runs
        big = slots.take(sized(2, job_id=2))
        waiting = asyncio.create_task(slots.start(big))
        await asyncio.sleep(0)
        assert not waiting.done() and not big.started
        order.append(f"free while the big case waits: {slots.free}")
        slots.give_back(small)
        await waiting
        order.append(f"big runs, free {slots.free}")
        slots.give_back(big)
        order.append(f"big over, free {slots.free}")
        return order

    assert asyncio.run(scenario()) == [
        "free while the big case waits: 0",
        "big runs, free 0",
        "big over, free 2",
    ]


def test_slots_with_two_slot_cases_run_them_one_at_a_time() -> None:
    async def scenario() -> int:
        slots, running, most = Slots(2), 0, 0

        async def case(job_run: JobRun) -> None:
            nonlocal running, most
            await slots.start(job_run)
            running += 1
            most = max(most, running)
            await asyncio.sleep(0.01)
            running -= 1
            slots.give_back(job_run)

        cases = [slots.take(sized(2, job_id=n)) for n in range(4)]
        await asyncio.gather(*(case(job_run) for job_run in cases))
        assert (slots.used, slots.running) == (0, 0)
        return most

    assert asyncio.run(scenario()) == 1


def test_a_waiting_case_cancelled_gives_its_turn_to_the_next() -> None:
    async def scenario() -> bool:
        slots = Slots(2)
        running = slots.take(sized(2))
        await slots.start(running)
        first = slots.take(sized(2, job_id=2))
        second = slots.take(sized(1, job_id=3))
        first_waits = asyncio.create_task(slots.start(first))
        second_waits = asyncio.create_task(slots.start(second))
        await asyncio.sleep(0)
        first_waits.cancel()
        slots.give_back(first)  # as the job's task does on its way out
        slots.give_back(running)
        await second_waits
        assert (slots.used, slots.running) == (1, 1)
        return second.started

    assert asyncio.run(scenario())


def test_after_short_cases_twice_as_many_again_are_leased_ahead_and_wait_their_turn() -> None:
    async def scenario() -> None:
        slots = Slots(2)
        for job_id in (1, 2):  # two short cases run and end
            done = slots.take(sized(1, job_id))
            await slots.start(done)
            slots.give_back(done)
        assert (slots.free, slots.ahead, slots.leasable) == (2, 4, 6)
        held = [slots.take(sized(1, job_id)) for job_id in (3, 4, 5, 6, 7, 8)]
        assert [run.ahead for run in held] == [False, False, True, True, True, True]
        assert (slots.free, slots.leasable) == (0, 0)
        for run in held[:2]:
            await slots.start(run)
        third = asyncio.create_task(slots.start(held[2]))
        await asyncio.sleep(0)
        assert not held[2].started  # two run: it waits for one to be over
        slots.give_back(held[0])
        await third
        assert held[2].started and slots.running == 2
        assert not any(run.started for run in held[3:])  # the rest wait their turns

    asyncio.run(scenario())


def test_a_long_case_or_a_wide_one_held_turns_leasing_ahead_off() -> None:
    async def scenario() -> None:
        slots = Slots(2)
        for job_id in (1, 2):
            done = slots.take(sized(1, job_id))
            await slots.start(done)
            slots.give_back(done)
        assert slots.ahead == 4
        wide = slots.take(sized(2, 3))
        assert (slots.ahead, slots.leasable) == (0, 0)  # nothing leased past it
        await slots.start(wide)
        slots.give_back(wide)
        slots._recent[-1] = 5.0  # as if it had run 5 s
        assert (slots.ahead, slots.leasable) == (0, 2)

    asyncio.run(scenario())


def test_once_leases_nothing_ahead() -> None:
    slots = Slots(2, lease_ahead=False)
    slots._recent.extend([0.01, 0.01])
    assert (slots.ahead, slots.leasable) == (0, 2)


def test_a_job_leased_ahead_is_not_counted_as_running_until_it_starts() -> None:
    async def scenario() -> None:
        slots = Slots(1)
        slots._recent.append(0.01)
        running, ahead = slots.take(sized(1, 1)), slots.take(sized(1, 2))
        await slots.start(running)
        assert (running.waiting_ahead, ahead.waiting_ahead) == (False, True)
        slots.give_back(running)
        await slots.start(ahead)
        assert not ahead.waiting_ahead

    asyncio.run(scenario())
