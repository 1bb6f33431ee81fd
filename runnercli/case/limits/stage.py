"""The `Limits` stage: the agent stopped at the first event over a limit.

Listed before `Execute`, it reads what tells the use as it comes: the harness's stdout line by
line (a streamed `output`), and the `usage` events the harness appends to its trace file
(`$EVERDICT_TRACE_FILE`, read here on its own, so `--no-trace` changes nothing). At the first
event that passes a limit it asks `Execute` to stop the agent — SIGTERM, then SIGKILL after the
grace — without ending the case: the verifier still runs on what the agent left and the grader
decides. The result says what stopped it (`stopped: {by: limit, limit, used, limits}`), the
case's log how far it got.
"""

from __future__ import annotations

import asyncio
import json

from runnercli.case.limits.meter import Meter
from runnercli.case.pipeline import CaseContext, Given, Stage
from runnercli.case.trace.stage import TRACE_FILE, TRACE_FILE_ENV
from runnercli.case.trace.tracefile import TraceFileFollower
from runnercli.protocol.verifying import Stopped
from runnercli.tasks import cancel_and_wait

MAX_EVENT_BYTES = 8 * 1024 * 1024
STREAMS = ("claude-stream-json", "codex-jsonl")
# How often the trace file is looked at while the agent runs.
TRACE_TICK_S = 0.05


class Limits(Stage):
    name = "limits"
    needs = frozenset({Given.DIRECTORY})

    def __init__(self, tick_s: float = TRACE_TICK_S) -> None:
        self.meter: Meter | None = None
        self.partial = bytearray()
        self.case: CaseContext | None = None
        self.tick_s = tick_s
        self.follower: TraceFileFollower | None = None
        self.task: asyncio.Task[None] | None = None

    async def start(self, case: CaseContext) -> None:
        spec = case.job.harness.spec
        if spec.limits is None:
            return
        self.meter, self.case = Meter(spec.output, spec.limits), case
        if spec.output in STREAMS:
            case.stdout_chunks.append(self.feed)
        # The same file the trace stage follows (it names it first when it is in the pipeline).
        path = case.env.setdefault(TRACE_FILE_ENV, str(case.directory / TRACE_FILE))
        self.follower = TraceFileFollower(path)
        self.task = asyncio.create_task(self._follow())

    async def finish(self, case: CaseContext) -> None:
        await self._stop_following()

    async def cleanup(self, case: CaseContext) -> None:
        await self._stop_following()

    def feed(self, chunk: bytes) -> None:
        self.partial += chunk
        *lines, rest = self.partial.split(b"\n")
        # A line longer than any event is not one: it is let go.
        self.partial = bytearray(rest) if len(rest) <= MAX_EVENT_BYTES else bytearray()
        for line in lines:
            self._line(line)

    async def _follow(self) -> None:
        follower, meter, case = self.follower, self.meter, self.case
        assert follower is not None and meter is not None and case is not None
        # Until the agent has ended: what the verifier does after it is no agent's use.
        while case.outcome is None and not self._stopped():
            for draft in follower.poll():
                if draft.kind == "usage" and not self._stopped():
                    self._passes(meter.usage(draft.data))
            await asyncio.sleep(self.tick_s)

    async def _stop_following(self) -> None:
        task, self.task = self.task, None
        if task is not None:
            await cancel_and_wait(task)

    def _stopped(self) -> bool:
        return self.case is None or self.case.stop_agent.is_set()

    def _line(self, line: bytes) -> None:
        meter = self.meter
        if meter is None or self._stopped() or not line.strip():
            return
        try:
            obj = json.loads(line)
        except ValueError:
            return
        self._passes(meter.event(obj))

    def _passes(self, limit: str | None) -> None:
        meter, case = self.meter, self.case
        if limit is None or meter is None or case is None:
            return
        limits = case.job.harness.spec.limits
        assert limits is not None
        case.adds["stopped"] = Stopped(
            by="limit",
            limit=limit,
            used=meter.used(),
            limits=limits.model_dump(exclude_none=True),
        )
        case.note(meter.said(limit))
        case.stop_agent.set()
