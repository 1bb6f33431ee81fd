"""`--max-concurrent N|auto` and the slots cases take: a case needing more slots than are
free waits for them, in turn, and nothing smaller is leased past it meanwhile."""

from __future__ import annotations

import asyncio
import os

import click
import pytest
from click.testing import CliRunner

from runnercli.capacity import MAX_CONCURRENT_TYPE, Slots, auto_concurrency, usable_cores


def test_auto_is_half_the_cores_and_at_least_one() -> None:
    assert [auto_concurrency(cores) for cores in (1, 2, 3, 8, 64)] == [1, 1, 1, 4, 32]
    assert usable_cores(None, lambda: 6) == 6
    assert usable_cores(lambda pid: {0, 3}, lambda: 64) == 2
    assert usable_cores(None, lambda: None) == 1


@pytest.mark.skipif(len(os.sched_getaffinity(0)) != 2, reason="this machine does not offer 2 cores")
def test_auto_on_this_two_core_machine_is_one() -> None:
    assert auto_concurrency() == 1


@click.command()
@click.option("--max-concurrent", type=MAX_CONCURRENT_TYPE, default="1")
def probe(max_concurrent: int) -> None:
    click.echo(repr(max_concurrent))


@pytest.mark.parametrize(
    ("given", "read"),
    [("auto", repr(auto_concurrency())), ("AUTO", repr(auto_concurrency())), ("3", "3")],
)
def test_max_concurrent_takes_a_number_or_auto(given: str, read: str) -> None:
    done = CliRunner().invoke(probe, ["--max-concurrent", given])
    assert (done.exit_code, done.output) == (0, read + "\n")


@pytest.mark.parametrize("given", ["0", "-1", "65", "two", ""])
def test_max_concurrent_refuses_anything_else(given: str) -> None:
    done = CliRunner().invoke(probe, ["--max-concurrent", given])
    assert done.exit_code == 2
    assert "Invalid value for '--max-concurrent'" in done.output


def test_a_case_takes_its_harnesss_slots_and_never_more_than_the_machine_has() -> None:
    slots = Slots(2)
    assert [slots.need(n) for n in (None, 0, 1, 2, 5)] == [1, 1, 1, 2, 2]
    assert slots.take(1) == 1 and slots.free() == 1
    assert not slots.fits(2) and slots.fits(1)
    with pytest.raises(ValueError):
        slots.take(2)
    slots.give(1)
    assert slots.take(2) == 2 and slots.free() == 0
    with pytest.raises(ValueError):
        slots.give(3)
    with pytest.raises(ValueError):
        Slots(0)


def test_a_two_slot_case_waits_and_nothing_is_leased_past_it() -> None:
    async def scenario() -> list[str]:
        slots, order = Slots(2), []
        slots.take(1)  # a one-slot case runs
        big = asyncio.create_task(slots.acquire(2))
        await asyncio.sleep(0.01)
        assert not big.done()
        order.append(f"free while the big case waits: {slots.free()}")
        small = asyncio.create_task(slots.acquire(1))
        await asyncio.sleep(0.01)
        assert not small.done(), "a later small case does not overtake the big one"
        slots.give(1)
        assert await big == 2
        order.append("big runs")
        slots.give(2)
        assert await small == 1
        order.append(f"small runs, free {slots.free()}")
        return order

    assert asyncio.run(scenario()) == [
        "free while the big case waits: 0",
        "big runs",
        "small runs, free 1",
    ]


def test_slots_with_two_slot_cases_run_them_one_at_a_time() -> None:
    async def scenario() -> int:
        slots, running, most = Slots(2), 0, 0

        async def case() -> None:
            nonlocal running, most
            async with slots.held(2):
                running += 1
                most = max(most, running)
                await asyncio.sleep(0.01)
                running -= 1

        await asyncio.gather(*(case() for _ in range(4)))
        assert slots.used == 0
        return most

    assert asyncio.run(scenario()) == 1


def test_a_waiting_case_cancelled_gives_its_turn_to_the_next() -> None:
    async def scenario() -> int:
        slots = Slots(2)
        slots.take(2)
        first = asyncio.create_task(slots.acquire(2))
        second = asyncio.create_task(slots.acquire(1))
        await asyncio.sleep(0.01)
        first.cancel()
        await asyncio.sleep(0.01)
        slots.give(2)
        taken = await second
        assert slots.used == 1 and slots.free() == 1
        return taken

    assert asyncio.run(scenario()) == 1
