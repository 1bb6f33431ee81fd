"""Results on their way to the server: alone when nothing is in flight, together when they queue."""

from __future__ import annotations

import asyncio

from runnercli.client import RunnerClient, ToolCallError
from runnercli.protocol import Ack, ResultReport
from runnercli.tasks import cancel_and_wait

# A result ready to send, and the future its case awaits the ack on.
_Waiting = tuple[ResultReport, asyncio.Future[Ack]]
# How long a result that finds no call in flight waits for others finishing about then, to
# go in one call with them: a case's slot is free already, only its ack waits.
GATHER_S = 0.01


class ResultSender:
    """Submit results as they become ready, together when they queue up behind a call.

    A result that finds no submit in flight goes after `gather_s`, with those that became
    ready meanwhile; those that become ready while one is in flight wait for it, then go in
    one `submit_job_results` call. Each caller awaits its own ack and sees its own error, so
    retries and refusals stay per job.
    """

    def __init__(self, client: RunnerClient, *, gather_s: float = GATHER_S) -> None:
        self.client = client
        self.gather_s = gather_s
        # Off for good once the server turns out not to know `submit_job_results`.
        self.batches = True
        self._queue: list[_Waiting] = []
        self._sending: list[_Waiting] = []
        self._pump: asyncio.Task[None] | None = None

    async def submit(self, report: ResultReport) -> Ack:
        """Send one result, with any waiting beside it; raise what the client raises."""
        if not self.batches:
            return await self._submit_one(report)
        future: asyncio.Future[Ack] = asyncio.get_running_loop().create_future()
        self._queue.append((report, future))
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._drain(), name="results")
        return await future

    @property
    def in_flight(self) -> int:
        """How many results the call now in flight carries."""
        return len(self._sending)

    async def close(self) -> None:
        """Stop sending; whoever still awaits an ack is canceled."""
        try:
            if self._pump is not None:
                await cancel_and_wait(self._pump)
        finally:
            for _, future in [*self._sending, *self._queue]:
                future.cancel()
            self._sending, self._queue = [], []

    async def _drain(self) -> None:
        if self.gather_s > 0 and len(self._queue) < self.client.limits.max_results_per_call:
            await asyncio.sleep(self.gather_s)
        while self._queue:
            self._sending = self._take()
            if len(self._sending) > 1 and self.batches:
                await self._send_together(self._sending)
            else:
                await self._send_alone(self._sending)
            self._sending = []

    def _take(self) -> list[_Waiting]:
        """The oldest queued results that fit in one call (the server's limits) and are still
        awaited."""
        limits = self.client.limits
        batch: list[_Waiting] = []
        size = 0
        while self._queue and len(batch) < limits.max_results_per_call:
            report, future = self._queue[0]
            weight = _weight(report)
            if batch and size + weight > limits.max_bytes_per_call:
                break
            del self._queue[0]
            if not future.done():  # its case stopped waiting
                batch.append((report, future))
                size += weight
        return batch

    async def _send_together(self, batch: list[_Waiting]) -> None:
        try:
            acks = await self.client.submit_job_results([report for report, _ in batch])
        except ToolCallError as exc:
            if "unknown tool" in str(exc).lower():
                self.batches = False
            # Refused as a whole: alone, each result gets an answer of its own, and only a
            # bad one is refused.
            await self._send_alone(batch)
            return
        except Exception as exc:
            for _, future in batch:
                _settle(future, exc)
            return
        for (_, future), ack in zip(batch, acks, strict=True):
            _settle(future, ack)

    async def _send_alone(self, batch: list[_Waiting]) -> None:
        await asyncio.gather(*(self._forward(report, future) for report, future in batch))

    async def _forward(self, report: ResultReport, future: asyncio.Future[Ack]) -> None:
        try:
            ack = await self._submit_one(report)
        except Exception as exc:
            _settle(future, exc)
        else:
            _settle(future, ack)

    async def _submit_one(self, report: ResultReport) -> Ack:
        return await self.client.submit_job_result(
            job_id=report.job_id, lease_epoch=report.lease_epoch, result=report.result
        )


def _weight(report: ResultReport) -> int:
    # Weighed as sent (JSON-escaped), never less than the raw bytes the server counts: a
    # batch of heavily escaped text stays within the server's request size as well.
    return len(report.result.model_dump_json(include={"output", "stderr_tail"}))


def _settle(future: asyncio.Future[Ack], outcome: Ack | Exception) -> None:
    if future.done():  # its case stopped waiting
        return
    if isinstance(outcome, Ack):
        future.set_result(outcome)
    else:
        future.set_exception(outcome)
