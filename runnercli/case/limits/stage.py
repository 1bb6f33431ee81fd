"""The `Limits` stage: the agent stopped at the first event of its stream over a limit.

Listed before `Execute`, it reads the harness's stdout line by line as it comes (a streamed
`output` only: the stream is what tells the use) and, at the first event that passes a limit,
asks `Execute` to stop the agent — SIGTERM, then SIGKILL after the grace — without ending the
case: the verifier still runs on what the agent left and the grader decides. The result says
what stopped it (`stopped: {by: limit, limit, used, limits}`), the case's log how far it got.
"""

from __future__ import annotations

import json

from runnercli.case.limits.meter import Meter
from runnercli.case.pipeline import CaseContext, Stage
from runnercli.protocol.verifying import Stopped

MAX_EVENT_BYTES = 8 * 1024 * 1024
STREAMS = ("claude-stream-json", "codex-jsonl")


class Limits(Stage):
    name = "limits"

    def __init__(self) -> None:
        self.meter: Meter | None = None
        self.partial = bytearray()
        self.case: CaseContext | None = None

    async def start(self, case: CaseContext) -> None:
        spec = case.job.harness.spec
        if spec.limits is None or spec.output not in STREAMS:
            return
        self.meter, self.case = Meter(spec.output, spec.limits), case
        case.stdout_chunks.append(self.feed)

    def feed(self, chunk: bytes) -> None:
        self.partial += chunk
        *lines, rest = self.partial.split(b"\n")
        # A line longer than any event is not one: it is let go.
        self.partial = bytearray(rest) if len(rest) <= MAX_EVENT_BYTES else bytearray()
        for line in lines:
            self._line(line)

    def _line(self, line: bytes) -> None:
        meter, case = self.meter, self.case
        if meter is None or case is None or case.stop_agent.is_set() or not line.strip():
            return
        try:
            obj = json.loads(line)
        except ValueError:
            return
        limit = meter.event(obj)
        if limit is None:
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
