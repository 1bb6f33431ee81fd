"""The load of running cases watched live: each case sending frames and trace events to the
server as the runner does (its own client and calls), and what the server process spends.

Used by `trace_screens.py`.
"""

from __future__ import annotations

import asyncio
import os
import struct
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# The runner sends what waits every quarter of a second: 10 events/s is 2-3 per call.
TICK_S = 0.25


def _chunk(tag: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))


def screen_base(kib: int = 48) -> tuple[bytes, bytes]:
    """A PNG of noisy pixels about `kib` KiB (a busy page's screenshot): its head, its tail."""
    width = 320
    height = max(1, kib * 1024 // (width * 3))
    rows = b"".join(b"\x00" + os.urandom(width * 3) for _ in range(height))
    head = PNG_SIGNATURE + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    tail = _chunk(b"IDAT", zlib.compress(rows, 1)) + _chunk(b"IEND", b"")
    return head, tail


def frame(base: tuple[bytes, bytes], case: int, n: int) -> bytes:
    """A distinct frame (a text chunk says which): content-addressed blobs are never shared."""
    head, tail = base
    return head + _chunk(b"tEXt", f"frame\x00{case}-{n}".encode()) + tail


def events(first: int, count: int, ts: int) -> list[Any]:
    """`count` events of an agent at work: a message, a tool call and its result in turn."""
    from runnercli.protocol import TraceEvent

    made = []
    for seq in range(first, first + count):
        kind = ("message", "tool_call", "tool_result")[seq % 3]
        if kind == "message":
            data: dict[str, Any] = {"text": "Looking at the failing test output next. " * 5}
        elif kind == "tool_call":
            data = {"id": f"t{seq}", "input": {"command": f"npm test -- --grep case{seq}"}}
        else:
            data = {"call_id": f"t{seq - 1}", "is_error": False, "content": "ok\n" * 150}
        made.append(TraceEvent(seq=seq, ts=ts, kind=cast(Any, kind), name="Bash", data=data))
    return made


@dataclass
class Calls:
    """Round trips of one kind of call, in milliseconds."""

    took: list[float] = field(default_factory=list)
    failed: int = 0

    async def time(self, call: Callable[[], Awaitable[Any]]) -> None:
        began = time.perf_counter()
        try:
            reply = await call()
        except Exception:
            self.failed += 1
            return
        if getattr(reply, "accepted", True) is False:
            self.failed += 1
            return
        self.took.append((time.perf_counter() - began) * 1000)


@dataclass
class Load:
    """25 running cases' frames and events, sent by one runner's client."""

    client: Any
    leases: list[tuple[int, int]]
    base: tuple[bytes, bytes]
    frames_per_s: float = 1.0
    events_per_s: float = 10.0
    screens: Calls = field(default_factory=Calls)
    traces: Calls = field(default_factory=Calls)
    next_seq: dict[int, int] = field(default_factory=dict)
    frames_sent: int = 0
    events_sent: int = 0

    async def run(self, seconds: float) -> None:
        self.screens, self.traces = Calls(), Calls()
        self.frames_sent = self.events_sent = 0
        ends = time.monotonic() + seconds
        await asyncio.gather(*(self._case(i, lease, ends) for i, lease in enumerate(self.leases)))

    async def _case(self, index: int, lease: tuple[int, int], ends: float) -> None:
        # Cases start spread over a tick, as cases that began at different times do.
        await asyncio.sleep(TICK_S * index / max(1, len(self.leases)))
        await asyncio.gather(self._events(lease, ends), self._frames(index, lease, ends))

    async def _events(self, lease: tuple[int, int], ends: float) -> None:
        """What waits is sent every tick; a slow answer makes the next batch bigger, as the
        runner's batcher does, so the rate holds whatever the round trip."""
        from runnercli.case.trace.calls import report_case_trace

        job_id, epoch = lease
        began, sent = time.monotonic(), 0
        while self.events_per_s and (now := time.monotonic()) < ends:
            count = min(200, int(self.events_per_s * (now - began)) - sent)
            if count > 0:
                first = self.next_seq.get(job_id, 0)
                batch = events(first, count, time.time_ns() // 1_000_000)
                self.next_seq[job_id] = first + count
                sent += count
                self.events_sent += count
                call = partial(
                    report_case_trace, self.client, job_id=job_id, lease_epoch=epoch, events=batch
                )
                await self.traces.time(call)
            await asyncio.sleep(max(0.0, TICK_S - (time.monotonic() - now)))

    async def _frames(self, index: int, lease: tuple[int, int], ends: float) -> None:
        """The newest frame once a second; a frame whose second has passed is not sent (the
        runner sends only the newest)."""
        from runnercli.case.screens.calls import report_case_screen

        job_id, epoch = lease
        interval, n = 1 / self.frames_per_s if self.frames_per_s else 0.0, 0
        while interval and (now := time.monotonic()) < ends:
            call = partial(
                report_case_screen,
                self.client,
                job_id=job_id,
                lease_epoch=epoch,
                media_type="image/png",
                data=frame(self.base, index, n),
                taken_at=time.time_ns() // 1_000_000,
            )
            self.frames_sent += 1
            n += 1
            await self.screens.time(call)
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - now)))
