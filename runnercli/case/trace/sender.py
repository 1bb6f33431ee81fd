"""A case's trace on its way: batches sent in order until the server holds every event.

The batcher keeps each event until the server acknowledges it (`TraceAck.last_seq`), so a
batch lost with a dropped connection goes again, and one the server already stored (its
answer was lost) stores nothing twice. A refusal of the lease (stale, canceled) stops the
sending for good; the server's passing trouble only waits a backoff delay.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from runnercli.case.trace.batches import TraceBatcher
from runnercli.case.trace.calls import report_case_trace
from runnercli.client import RunnerClient, ServerUnavailable, ToolCallError
from runnercli.client.backoff import Backoff


class TraceSender:
    """Sends one attempt's batches; `epoch` is read at each call (a new grant replaces it)."""

    def __init__(
        self,
        client: RunnerClient,
        batcher: TraceBatcher,
        *,
        job_id: int,
        epoch: Callable[[], int],
        note: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.client = client
        self.batcher = batcher
        self.job_id = job_id
        self.epoch = epoch
        self.note = note
        self.backoff = Backoff()
        # Why the server will take no more of this trace (the lease is gone), once it said so.
        self.refused: str | None = None
        self._retry_at = 0.0

    @property
    def done(self) -> bool:
        """Nothing left to send, or nothing more will be taken."""
        return self.refused is not None or not self.batcher.unacknowledged

    async def send_ready(self) -> None:
        """Send what is waiting, unless a backoff delay is running; stop at the first trouble."""
        while not self.done and time.monotonic() >= self._retry_at:
            if not await self._send_one():
                return

    async def flush(self, patience_s: float) -> bool:
        """Send everything, waiting out the server's trouble for up to `patience_s`; return
        whether the server holds it all (or refused it for good)."""
        deadline = time.monotonic() + patience_s
        while not self.done:
            wait = self._retry_at - time.monotonic()
            if wait > 0:
                if time.monotonic() + wait > deadline:
                    return False
                await asyncio.sleep(wait)
            await self.send_ready()
        return True

    async def _send_one(self) -> bool:
        batch = self.batcher.next_batch()
        try:
            ack = await report_case_trace(
                self.client, job_id=self.job_id, lease_epoch=self.epoch(), events=batch
            )
        except ServerUnavailable:
            self._retry_at = time.monotonic() + self.backoff.next_delay()
            return False
        except ToolCallError as exc:
            # A batch the server will never take: said once, and left behind.
            self.note(f"⚠ trace events {batch[0].seq} to {batch[-1].seq} refused: {exc}")
            self.batcher.acknowledge(batch[-1].seq)
            return True
        self.backoff.reset()
        if not ack.accepted:
            self.refused = ack.reason or "refused"
            return False
        if ack.last_seq < batch[0].seq:
            # The server holds less than this runner thought it acknowledged: nothing sent
            # from here can fill that gap.
            self.refused = f"the server holds the trace only up to event {ack.last_seq}"
            self.note(f"⚠ {self.refused}")
            return False
        self.batcher.acknowledge(ack.last_seq)
        return True
