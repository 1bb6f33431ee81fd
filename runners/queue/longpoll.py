"""The long-poll: claim at once if a job is claimable, else park until woken or the deadline.

A lease must never be leaked to a caller that is gone. The SDK ends the call of a client
that hung up through an anyio cancel scope, which re-cancels every later await until the
scope exits; so the poll runs in a task of its own that sees the cancellation once, a claim
in flight is always awaited to its end, and whatever was claimed for nobody is given back
here, in one place.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import anyio
from channels.db import database_sync_to_async

from runnercli.protocol import MAX_WAIT_MS
from runners import metrics, wakeup
from runners.models import Runner
from runners.presence import runner_touch, runner_touch_deferred
from runners.queue.claim import LeasedJob, job_lease
from runners.queue.handback import job_release

T = TypeVar("T")

log = logging.getLogger(__name__)


async def cancel_once(
    coro: Coroutine[Any, Any, T], *, undelivered: Callable[[T], Awaitable[None]]
) -> T:
    """Await `coro` in its own task, forwarding a cancellation to it exactly once.

    Its cleanup then runs to the end under a shield, and a result that was ready but can no
    longer be delivered is handed to `undelivered`, also shielded.
    """
    task = asyncio.ensure_future(coro)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.cancel()
        with anyio.CancelScope(shield=True):
            await asyncio.wait([task])
            if not task.cancelled() and task.exception() is None:
                try:
                    await undelivered(task.result())
                except Exception:
                    # The cancellation still goes on; the lease will expire instead.
                    log.exception("could not give back an undelivered result")
        raise


async def job_lease_wait(
    *,
    runner: Runner,
    capabilities: Sequence[str] | None = None,
    status: str = "",
    wait_ms: int = 0,
    max_jobs: int = 1,
    features: tuple[int, Sequence[str]] | None = None,
) -> list[LeasedJob]:
    """Long-poll: claim at once if a job is claimable, else park until woken or `wait_ms`.

    The claim happens only when about to answer; if the caller is cancelled, what it claimed
    goes back to the queue instead of leaking a lease. `features` is the runner's
    `(protocol, features)` now, stored by the first claim like its capabilities.
    """
    poll = _poll(runner, capabilities, status, wait_ms, max_jobs, features)
    leased = await cancel_once(poll, undelivered=lambda grants: _give_back(runner, grants))
    metrics.LEASE_CALLS.labels(outcome="job" if leased else "empty").inc()
    return leased


async def _give_back(runner: Runner, grants: list[LeasedJob]) -> None:
    for grant in grants:
        await database_sync_to_async(job_release, thread_sensitive=False)(
            runner=runner, job_id=grant.job.pk, lease_epoch=grant.job.lease_epoch
        )


async def _whole(claiming: Awaitable[list[LeasedJob]]) -> list[LeasedJob]:
    """Await a claim to its end even if cancelled meanwhile: what it claimed is returned (for
    the caller to give back); a cancelled claim that found nothing ends the poll."""
    task = asyncio.ensure_future(claiming)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with anyio.CancelScope(shield=True):
            await asyncio.wait([task])
        if task.exception() is None and task.result():
            return task.result()
        raise


def _nothing_to_claim(
    runner: Runner,
    capabilities: Sequence[str] | None,
    features: tuple[int, Sequence[str]] | None,
) -> bool:
    unchanged = capabilities is None or sorted(set(capabilities)) == list(runner.capabilities or [])
    if features is not None:
        # Only the features decide what it may claim (its protocol is stored by `hello`).
        unchanged = unchanged and sorted(set(features[1])) == list(runner.features or [])
    return unchanged and wakeup.hub.known_empty(runner.owner_id)


async def _poll(
    runner: Runner,
    capabilities: Sequence[str] | None,
    status: str,
    wait_ms: int,
    max_jobs: int,
    features: tuple[int, Sequence[str]] | None,
) -> list[LeasedJob]:
    deadline = time.monotonic() + max(0, min(wait_ms, MAX_WAIT_MS)) / 1000
    wakeup.ensure_started()
    # Off the process's single "thread-sensitive" thread: a claim answering a parked runner
    # must not queue behind unrelated synchronous work (such as the dispatch that woke it).
    claim = database_sync_to_async(job_lease, thread_sensitive=False)
    first = True
    while True:
        # A fresh waiter each round, registered before the claim: a dispatch committing
        # while the claim runs sets this round's event and is never lost.
        with wakeup.hub.waiting(runner.owner_id) as waiter:
            if first and _nothing_to_claim(runner, capabilities, features):
                # The process's last re-check found none of the owner's jobs queued and no
                # wake-up came since: park at once (presence still counts).
                metrics.CLAIMS.labels(found="skipped").inc()
                if not runner_touch_deferred(runner=runner, status=status):
                    await database_sync_to_async(runner_touch, thread_sensitive=False)(
                        runner=runner, status=status
                    )
                leased = []
            else:
                leased = await _whole(
                    claim(
                        runner=runner,
                        capabilities=capabilities,
                        status=status,
                        max_jobs=max_jobs,
                        features=features,
                    )
                )
            first = False
            remaining = deadline - time.monotonic()
            if leased or remaining <= 0:
                return leased
            # Later rounds only re-check; the capabilities were stored by the first, and so
            # was the status: a line the runner sent since (a pause) is newer than this one.
            capabilities = features = None
            status = ""
            # Parked: woken by a dispatch, a notification or the process's re-check task.
            # Nothing woke it by the deadline: answer empty; the runner's next poll claims.
            if not await waiter.wait(remaining):
                return []
