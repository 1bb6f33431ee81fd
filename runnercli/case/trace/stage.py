"""The `Trace` stage: what the agent does, step by step, sent while the case runs.

Events come from the harness's trace file (`$EVERDICT_TRACE_FILE`, JSON lines it appends, in
the case's directory) and, when the harness's `output` is an agent's event stream
(`claude-stream-json`, `codex-jsonl`), from its stdout as it streams — whose final result
event then gives the case's output (the grader's input) and its usage and cost. Events are
numbered, redacted and bounded on this machine (this package), sent in batches while the case
runs and flushed when it ends (a stream whose session ended in the model API's error makes
the case an `error` quoting it); what the server could not take by then waits in the runner's
trace outbox (`outbox`), on disk. `--no-trace` keeps them here: the stream is still read for
the output, nothing is sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from runnercli.case.pipeline import CaseContext, Given, Stage
from runnercli.case.trace import StreamParser, TraceBatcher, TraceFileFollower, stream_parser
from runnercli.case.trace.outbox import TraceOutbox
from runnercli.case.trace.sender import TraceSender
from runnercli.client import RunnerClient
from runnercli.tasks import ended, wait_event

TRACE_FILE = "trace.jsonl"
TRACE_FILE_ENV = "EVERDICT_TRACE_FILE"
# How often the trace file is read and what waits is sent, while the case runs.
TICK_S = 0.25
# How long the end of a case waits for the server to take the rest of its trace; what is
# left then goes to the outbox (and the result is not held back by it).
FLUSH_PATIENCE_S = 5.0


class Trace(Stage):
    name = "trace"
    needs = frozenset({Given.DIRECTORY})

    def __init__(
        self,
        client: RunnerClient,
        *,
        send: bool = True,
        redact: Callable[[str], str] | None = None,
        outbox: TraceOutbox | None = None,
        tick_s: float = TICK_S,
        patience_s: float = FLUSH_PATIENCE_S,
    ) -> None:
        self.client = client
        self.send = send
        self.redact = redact
        self.outbox = outbox
        self.tick_s = tick_s
        self.patience_s = patience_s
        self.parser: StreamParser | None = None
        self.follower: TraceFileFollower | None = None
        self.sender: TraceSender | None = None
        self.task: asyncio.Task[None] | None = None
        # True while the follower's task sends a batch.
        self.sending = False
        self.closed = False

    async def start(self, case: CaseContext) -> None:
        path = case.directory / TRACE_FILE
        case.env[TRACE_FILE_ENV] = str(path)
        self.parser = parser = stream_parser(case.job.harness.spec.output)
        if parser is not None:
            case.stdout_chunks.append(lambda chunk: self._stdout(parser, chunk))
        if not self.send:
            return
        limits = self.client.limits
        batcher = TraceBatcher(
            redact=self.redact,
            max_events=limits.max_trace_events,
            max_bytes=limits.max_trace_bytes,
        )
        self.follower = follower = TraceFileFollower(path)
        self.sender = sender = TraceSender(
            self.client,
            batcher,
            job_id=case.job.job_id,
            epoch=lambda: case.job_run.epoch,
            note=case.note,
        )
        self.task = asyncio.create_task(self._follow(case, follower, sender), name="trace")

    async def finish(self, case: CaseContext) -> None:
        await self._close(case, self.patience_s)
        if self.parser is not None:
            output = self.parser.final_output()
            if output is not None:
                case.output = output
            case.usage = self.parser.final_usage()
            # The model API's error ended the agent's session: the case is an error quoting
            # it, never a completed case graded on an empty answer.
            error = self.parser.final_error()
            if error is not None:
                case.error = case.output = error

    async def cleanup(self, case: CaseContext) -> None:
        # Ended early (a kill, a failed stage, the runner going): what came is still sent,
        # from the outbox when there is no time to wait here.
        await self._close(case, 0.0 if case.cancelled else self.patience_s)

    def _stdout(self, parser: StreamParser, chunk: bytes) -> None:
        drafts = parser.feed(chunk) if chunk else parser.finish()
        if self.sender is not None and not self.closed:
            self.sender.batcher.add(drafts)

    async def _follow(
        self, case: CaseContext, follower: TraceFileFollower, sender: TraceSender
    ) -> None:
        while not case.exited.is_set():
            sender.batcher.add(follower.poll())
            self.sending = True
            try:
                await sender.send_ready()
            finally:
                self.sending = False
            await wait_event(case.exited, self.tick_s)

    async def _close(self, case: CaseContext, patience_s: float) -> None:
        """Read what is left, close the trace, and send it (or hand it to the outbox)."""
        if self.closed:
            return
        self.closed = True
        task, self.task = self.task, None
        if task is not None and task.done():
            if not task.cancelled():
                task.result()  # its error, if any, raised here
        elif task is not None:
            task.cancel()
            if self.sending:
                # Mid-send: its batch is answered (or not) before the rest is read.
                await ended(task)
            # Otherwise it waits for its next tick: cancelled there, nothing to wait for.
        sender = self.sender
        if sender is None or self.follower is None:
            return
        sender.batcher.add(self.follower.finish())
        sender.batcher.finish()
        if patience_s > 0 and not case.cancelled:
            await sender.flush(patience_s)
        if sender.refused is None and sender.batcher.unacknowledged and self.outbox is not None:
            pending = sender.batcher.pending()
            self.outbox.keep(case.job.job_id, case.job_run.epoch, case.job_run.title, pending)
