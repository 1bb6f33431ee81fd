"""A long-poll cancelled by a client that hung up still gives back what it claimed."""

from __future__ import annotations

import asyncio

import anyio

from runners.queue import cancel_once


async def _record(into: list[list[str]], value: list[str]) -> None:
    await asyncio.sleep(0.01)  # an await that an anyio cancel scope would interrupt
    into.append(value)


def test_the_cleanup_of_a_cancelled_long_poll_runs_to_the_end_under_an_anyio_scope() -> None:
    given_back: list[list[str]] = []

    async def long_poll() -> list[str]:
        # The shape of the queue's long-poll: a claim that completes even when the caller
        # is cancelled, then gives back what it claimed.
        claim = asyncio.ensure_future(asyncio.sleep(0.2, result=["job 1"]))
        try:
            return await asyncio.shield(claim)
        except asyncio.CancelledError:
            claimed = await claim
            await _record(given_back, claimed)
            raise

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            async def handler() -> None:
                await cancel_once(long_poll(), undelivered=lambda _: _record([], []))

            tg.start_soon(handler)
            await asyncio.sleep(0.05)
            tg.cancel_scope.cancel()  # what the SDK does when the client hangs up

    asyncio.run(main())
    assert given_back == [["job 1"]]


def test_a_result_ready_when_the_caller_is_cancelled_is_handed_back_undelivered() -> None:
    undelivered: list[list[str]] = []

    async def main() -> None:
        async with anyio.create_task_group() as tg:

            async def long_poll() -> list[str]:
                await asyncio.sleep(0.01)
                tg.cancel_scope.cancel()  # the client hangs up as the claim completes
                return ["job 2"]

            async def handler() -> None:
                await cancel_once(
                    long_poll(), undelivered=lambda grants: _record(undelivered, grants)
                )

            tg.start_soon(handler)

    asyncio.run(main())
    assert undelivered == [["job 2"]]
