"""Traces of ended cases the server did not hold yet: on disk until it does.

A case's trace is sent as it runs and flushed when it ends; what the server could not take
by then (it was away, the runner is stopping) is written here, beside the spooled results
(`runner.spool/<server>-<job>-<epoch>.trace.jsonl`, 0600, written to a temporary name and
renamed), and sent in the background until the server holds it — or, by a runner killed
meanwhile, at its next start. The server keeps each `(attempt, seq)` once, so what it held
already is sent again harmlessly, and it takes an attempt's trace from its runner even after
the result settled the job (within the resume window): the order of the two does not matter.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from runnercli.atomic import replace_file
from runnercli.case.trace.batches import TraceBatcher
from runnercli.case.trace.sender import TraceSender
from runnercli.config import mcp_url
from runnercli.protocol import TraceEvent
from runnercli.protocol.jsonl import json_lines
from runnercli.session import Session
from runnercli.tasks import cancel_and_wait, wait_event

SUFFIX = ".trace.jsonl"
# How long `close` waits for what is left to go before leaving it on disk.
CLOSE_PATIENCE_S = 5.0
RETRY_S = 2.0


@dataclass
class Kept:
    """One ended case's unsent trace."""

    job_id: int
    lease_epoch: int
    title: str
    events: list[TraceEvent]
    path: Path | None = None


class TraceOutbox:
    """Unsent traces of ended cases, sent in the background and kept on disk meanwhile."""

    def __init__(self, session: Session, directory: Path | None) -> None:
        self.session = session
        self.directory = directory
        self._prefix = hashlib.sha256(mcp_url(session.client.url).encode()).hexdigest()[:12]
        self._waiting: list[Kept] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def keep(self, job_id: int, lease_epoch: int, title: str, events: list[TraceEvent]) -> None:
        """Take a case's unsent events: on disk at once, sent as soon as the server answers."""
        if not events:
            return
        kept = Kept(job_id, lease_epoch, title, list(events))
        kept.path = self._write(kept)
        self._waiting.append(kept)
        self._start()

    def resend_spooled(self) -> None:
        """Pick up the traces an earlier run of this runner left on disk."""
        found = self._read_all()
        if found:
            self.session.status.event(f"sending the trace of {len(found)} case(s) kept earlier")
            self._waiting.extend(found)
            self._start()

    async def close(self, patience_s: float = CLOSE_PATIENCE_S) -> None:
        """Give what is waiting a moment to go; the rest stays on disk for the next start."""
        if self._task is None:
            return
        self._wake.set()
        await asyncio.wait([self._task], timeout=patience_s)
        with contextlib.suppress(Exception):  # a send's error was said where it happened
            await cancel_and_wait(self._task)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _start(self) -> None:
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._send_all(), name="trace-outbox")

    async def _send_all(self) -> None:
        while self._waiting:
            kept = self._waiting[0]
            if await self._send(kept):
                self._waiting.pop(0)
                self._forget(kept)
                continue
            self._wake.clear()
            await wait_event(self._wake, RETRY_S)

    async def _send(self, kept: Kept) -> bool:
        """Whether the server holds the trace now (or refused it for good)."""
        batcher = TraceBatcher()
        batcher.resume(kept.events)
        sender = TraceSender(
            self.session.client,
            batcher,
            job_id=kept.job_id,
            epoch=lambda: kept.lease_epoch,
        )
        await sender.flush(patience_s=0)
        kept.events = [event for event in kept.events if event.seq > batcher.acked_seq]
        if sender.refused is not None:
            self.session.status.event(
                f"{kept.title}: {len(kept.events)} trace event(s) refused: {sender.refused}"
            )
            return True
        return sender.done

    # ---- on disk

    def _path(self, job_id: int, lease_epoch: int) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / f"{self._prefix}-{job_id}-{lease_epoch}{SUFFIX}"

    def _write(self, kept: Kept) -> Path | None:
        target = self._path(kept.job_id, kept.lease_epoch)
        if target is None:
            return None
        head: dict[str, object] = {"server": mcp_url(self.session.client.url)}
        head |= {"title": kept.title, "job_id": kept.job_id, "lease_epoch": kept.lease_epoch}
        lines = [json.dumps(head)] + [e.model_dump_json() for e in kept.events]
        try:
            replace_file(target, ("\n".join(lines) + "\n").encode(), durable=True)
        except OSError as exc:
            self.session.status.event(f"⚠ {kept.title}: cannot keep its trace: {exc}")
            return None
        return target

    def _read_all(self) -> list[Kept]:
        if self.directory is None or not self.directory.is_dir():
            return []
        found = []
        for path in sorted(self.directory.glob(f"{self._prefix}-*{SUFFIX}")):
            try:
                found.append(self._read(path))
            except (OSError, ValueError, KeyError, TypeError, ValidationError) as exc:
                self.session.status.event(f"⚠ a kept trace could not be read ({path}): {exc}")
        return [kept for kept in found if kept.events]

    def _read(self, path: Path) -> Kept:
        head, *lines = json_lines(path.read_text(encoding="utf-8"))
        meta = json.loads(head)
        events = [TraceEvent.model_validate_json(line) for line in lines if line.strip()]
        kept = Kept(int(meta["job_id"]), int(meta["lease_epoch"]), str(meta["title"]), events)
        kept.path = path
        return kept

    def _forget(self, kept: Kept) -> None:
        if kept.path is not None:
            kept.path.unlink(missing_ok=True)
