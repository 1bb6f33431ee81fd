"""A job's log lines on their way to the server: batched, bounded, and kept while it is away."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from runnercli.client import RunnerClient, ServerUnavailable, ToolCallError
from runnercli.protocol import MAX_LOG_LINE_BYTES, MAX_LOG_TAIL_LINES
from runnercli.tasks import ended, wait_event
from runnercli.text.utf8 import clip_utf8

LOG_FLUSH_S = 0.5
LOG_BATCH_LINES = 50
# Lines kept while the server cannot take them; beyond this the oldest are dropped.
LOG_BACKLOG_LINES = 5000


class CaseLog:
    """Log lines of one job, pushed in batches (every LOG_FLUSH_S or LOG_BATCH_LINES lines)."""

    def __init__(
        self,
        client: RunnerClient,
        job_id: int,
        epoch: Callable[[], int],
        *,
        lock: asyncio.Lock | None = None,
        redact: Callable[[str], str] = str,
    ) -> None:
        self.client = client
        # The member's redaction: a line is redacted as it is added, before it is kept.
        self.redact = redact
        self.job_id = job_id
        # The job's current fence: a grant of the same job, leased again while the runner
        # slept, replaces its lease, and the lines after it go with the new one.
        self.epoch = epoch
        self.pending: list[str] = []
        self.dropped = 0
        self.refused = False
        self._closing = False
        self._wake = asyncio.Event()
        # Held while a push is in flight: the job's heartbeat waits for it rather than cross
        # it (`JobRun.calls`, shared with the heartbeats).
        self.lock = lock or asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        # Told when a push took the job's lapsed lease back (the runner had slept).
        self.on_resumed: Callable[[], None] | None = None

    def add(self, line: str) -> None:
        if self.refused:
            return
        # A NUL is no text to show, and PostgreSQL cannot store it. Redaction may lengthen
        # a line: it is cut to the bound after.
        line = self.redact(line.replace("\x00", "\ufffd"))
        self.pending.append(clip_utf8(line, MAX_LOG_LINE_BYTES))
        if len(self.pending) > LOG_BACKLOG_LINES:
            excess = len(self.pending) - LOG_BACKLOG_LINES
            del self.pending[:excess]
            self.dropped += excess
        if len(self.pending) >= LOG_BATCH_LINES:
            self._wake.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._pump(), name=f"log-{self.job_id}")

    async def _pump(self) -> None:
        while not self.refused and not self._closing:
            await wait_event(self._wake, LOG_FLUSH_S)
            self._wake.clear()
            await self.flush()

    async def flush(self) -> None:
        """Send what is pending; lines stay pending while the server cannot take them."""
        async with self.lock:
            while self.pending and not self.refused:
                if self.dropped:
                    self.pending.insert(0, f"[{self.dropped} log lines dropped]")
                    self.dropped = 0
                batch = self.pending[: max(1, self.client.limits.max_log_lines_per_call)]
                try:
                    ack = await self.client.report_case_log(
                        job_id=self.job_id, lease_epoch=self.epoch(), lines=batch
                    )
                except ServerUnavailable:
                    return  # kept for the next flush
                except ToolCallError:
                    # Sending the same batch again would be refused again.
                    del self.pending[: len(batch)]
                    self.dropped += len(batch)
                    continue
                del self.pending[: len(batch)]
                if not ack.accepted:
                    self.refused = True
                    self.pending.clear()
                elif ack.reason == "resumed" and self.on_resumed is not None:
                    self.on_resumed()

    async def close(self, *, flush: bool = True) -> None:
        """Stop pushing; with `flush`, send what is left (after a push in flight lands)."""
        self._closing = True
        if self._task is not None:
            if flush:
                self._wake.set()
            else:
                self._task.cancel()
            await ended(self._task)
        if flush:
            await self.flush()

    async def close_into_tail(self) -> list[str]:
        """Stop pushing and return the lines not sent yet, to ride with the result
        (`CaseResult.log_tail`): a short case's start and outcome lines need no call of
        their own. Lines beyond what a result carries are sent first, in order."""
        self._closing = True
        async with self.lock:  # a push in flight lands first
            if self._task is not None:
                self._task.cancel()
        if self._task is not None:
            await ended(self._task)
        if self.refused:
            return []
        if self.dropped:
            self.pending.insert(0, f"[{self.dropped} log lines dropped]")
            self.dropped = 0
        tail = self.pending[-MAX_LOG_TAIL_LINES:]
        self.pending = self.pending[: len(self.pending) - len(tail)]
        await self.flush()
        return tail
