"""How the runner waits on, and ends, its own tasks (`runnercli.tasks`).

Each wait is cancelled in the same turn as what it waits for arrives: there, Python 3.11's
`asyncio.wait_for` returned its result and dropped the cancellation, and
`suppress(CancelledError)` around `await task` swallowed it, so a task meant to stop ran on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from runnercli.case.delivery.batches import ResultSender
from runnercli.client import RunnerClient
from runnercli.protocol import CaseResult, Fingerprint, ResultReport
from runnercli.tasks import cancel_and_wait, ended, wait_event, within


async def _ran_on_after_cancel(wait: Callable[[asyncio.Event], Awaitable[Any]]) -> bool:
    """Whether a task waiting with `wait` ran on past its cancellation, which came in the
    same turn as the event it waits for."""
    event = asyncio.Event()
    ran_on: list[bool] = []

    async def waiter() -> None:
        await wait(event)
        ran_on.append(True)

    task = asyncio.create_task(waiter())
    await asyncio.sleep(0)  # it waits now
    event.set()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return bool(ran_on) or not task.cancelled()


def test_wait_event_says_whether_the_event_came_and_lets_a_cancellation_through() -> None:
    async def scenario() -> tuple[bool, bool, bool, bool]:
        event = asyncio.Event()
        timed_out = await wait_event(event, 0.01)
        asyncio.get_running_loop().call_later(0.01, event.set)
        came = await wait_event(event, 5)
        already = await wait_event(event, 0)
        ran_on = await _ran_on_after_cancel(lambda e: wait_event(e, 5))
        return timed_out, came, already, ran_on

    assert asyncio.run(scenario()) == (False, True, True, False)


def test_within_returns_in_time_raises_timeout_and_lets_a_cancellation_through() -> None:
    async def scenario() -> tuple[int, bool]:
        async def answer() -> int:
            await asyncio.sleep(0)
            return 42

        value = await within(answer(), 5)
        with pytest.raises(TimeoutError):
            await within(asyncio.sleep(5), 0.01)
        ran_on = await _ran_on_after_cancel(lambda e: within(e.wait(), 5))
        return value, ran_on

    assert asyncio.run(scenario()) == (42, False)


def test_ended_gives_what_await_gives_absorbs_the_tasks_own_cancellation_not_the_callers() -> None:
    async def scenario() -> tuple[Any, Any, bool, bool]:
        async def answer() -> str:
            return "done"

        async def broken() -> None:
            raise ValueError("its own error")

        value = await ended(asyncio.create_task(answer()))
        cancelled = await cancel_and_wait(asyncio.create_task(asyncio.sleep(5, "slept")))
        failed = asyncio.create_task(broken())
        await asyncio.sleep(0)  # it failed before it was cancelled
        with pytest.raises(ValueError, match="its own error"):
            await cancel_and_wait(failed)

        async def wait_ended(event: asyncio.Event) -> None:
            await ended(asyncio.create_task(event.wait()))

        async def wait_cancelled(event: asyncio.Event) -> None:
            # The task it cancels ends in the same turn as the caller's cancellation.
            task = asyncio.create_task(event.wait())
            await asyncio.sleep(0)
            await cancel_and_wait(task)

        return (
            value,
            cancelled,
            await _ran_on_after_cancel(wait_ended),
            await _ran_on_after_cancel(wait_cancelled),
        )

    assert asyncio.run(scenario()) == ("done", None, False, False)


def test_a_task_cancelled_while_it_closes_a_result_sender_ends_cancelled_every_ack_canceled() -> (
    None
):
    """A stop cancels the task closing the sender at any turn of its close: that task ends
    cancelled, and no one is left awaiting an ack that will never come."""

    async def scenario() -> tuple[list[int], list[int]]:
        swallowed, left_waiting = [], []
        async with RunnerClient("http://127.0.0.1:9", "rnr_unused") as client:
            for turns in range(1, 8):  # at 0 the close never begins
                # It gathers results for a while before its first call: nothing is sent.
                sender = ResultSender(client, gather_s=5.0)
                reports = [ResultReport(job_id=n, lease_epoch=1, result=_result()) for n in (1, 2)]
                submits = [asyncio.create_task(sender.submit(r)) for r in reports]
                await asyncio.sleep(0)
                closing = asyncio.create_task(sender.close())
                for _ in range(turns):
                    await asyncio.sleep(0)
                if closing.cancel():
                    await asyncio.gather(closing, return_exceptions=True)
                    if not closing.cancelled():
                        swallowed.append(turns)
                await asyncio.wait(submits, timeout=1)
                if not all(s.done() for s in submits):
                    left_waiting.append(turns)
                    for s in submits:
                        s.cancel()
        return swallowed, left_waiting

    assert asyncio.run(scenario()) == ([], [])


def _result() -> CaseResult:
    fingerprint = Fingerprint(os="linux", python="3.11", runnercli_version="test")
    return CaseResult(
        status="completed", exit_code=0, output="x", duration_ms=5, fingerprint=fingerprint
    )
