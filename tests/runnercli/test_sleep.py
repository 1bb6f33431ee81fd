"""Noticing a sleep, and saying what waking found."""

from __future__ import annotations

import asyncio
import time

import pytest

from runnercli.case.heartbeats import (
    KEPT,
    LOST,
    RESUMED,
    TAKEN,
    Beat,
    SleepWatch,
    duration,
    wake_summary,
)


def test_a_process_that_did_not_run_for_a_while_is_told_once_how_long() -> None:
    woke: list[float] = []

    async def scenario() -> None:
        watch = SleepWatch(woke.append, threshold_s=0.5, tick_s=0.05)
        watcher = asyncio.create_task(watch.run())
        await asyncio.sleep(0.2)
        time.sleep(0.8)  # nothing runs: as if the process were stopped
        await asyncio.sleep(0.3)
        watcher.cancel()

    asyncio.run(scenario())
    assert len(woke) == 1
    assert 0.5 <= woke[0] < 1.5


def test_a_sleep_already_taken_is_not_told_again() -> None:
    woke: list[float] = []
    watch = SleepWatch(woke.append, threshold_s=0.2, tick_s=0.01)
    time.sleep(0.3)
    gap = watch.take_gap()
    assert gap is not None and gap >= 0.2
    assert watch.take_gap() is None


def test_the_wake_up_line_names_what_each_case_became() -> None:
    beats = [Beat(RESUMED), Beat(TAKEN, "stale lease: epoch 1"), Beat(KEPT)]
    assert wake_summary(14 * 60, beats) == (
        "slept 14 min — 1 case resumed, 1 case still leased, 1 taken by another runner"
    )
    assert wake_summary(20, []) == "slept 20 s — no case held"
    assert wake_summary(None, [Beat(LOST, "not leased")]) == (
        "a lease had lapsed — 1 lost (not leased)"
    )


@pytest.mark.parametrize(
    ("seconds", "text"), [(14, "14 s"), (14 * 60, "14 min"), (2 * 3600 + 300, "2 h 5 min")]
)
def test_a_sleep_is_said_in_words(seconds: float, text: str) -> None:
    assert duration(seconds) == text
