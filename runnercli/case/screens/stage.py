"""The `Screens` stage: what a case's screen shows, sent while it runs.

A harness that drives a screen (a headless browser, say) writes frames, PNG or JPEG, into
`$EVERDICT_SCREEN_DIR` (a directory of the case's own); the newest is sent at most once per
`limits.screen_interval_ms` (`watcher.ScreenWatcher`; older unsent frames are never
sent), and the newest once more when the case ends, so the filmstrip ends where the case did.
A frame the server refuses is skipped; a refused lease stops the sending. `--no-screens`
keeps them here: the directory is still given, nothing is sent. A frame goes inline in its
call, but one of 256 KiB or more that the filmstrip will keep (the server says so in its
reply to the frame before: never of a case's first) goes up by raw `PUT` first when both
sides do `raw_upload`, and the call names the blob: the strip keeps it as it is, with no
base64 on the way.

The directories are the runner's own (beside its case files, removed when it exits), each
given to one case at a time and emptied after it: most harnesses never write a frame, and
making and removing a directory for every case costs milliseconds on some filesystems.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import shutil
from pathlib import Path

from runnercli.case.artifacts.upload import UploadRefused, upload
from runnercli.case.input import case_files_dir
from runnercli.case.pipeline import CaseContext, Stage
from runnercli.case.screens.calls import report_case_screen
from runnercli.case.screens.watcher import Frame, ScreenWatcher, Skipped
from runnercli.case.trace.events import now_ms
from runnercli.client import RunnerClient, ServerUnavailable, ToolCallError
from runnercli.protocol import RAW_UPLOAD_MIN_BYTES, BlobRef, JobFence
from runnercli.tasks import ended, wait_event

SCREEN_DIR_ENV = "EVERDICT_SCREEN_DIR"
TICK_S = 0.2
# A frame is live only so long: its upload does not wait out a server out of reach.
UPLOAD_PATIENCE_S = 5.0


class ScreenDirs:
    """Screen directories made once and handed to one case at a time, emptied between."""

    def __init__(self, base: Path | None = None) -> None:
        self.base = base
        self._free: list[Path] = []
        self._made = 0

    def acquire(self) -> Path:
        if self._free:
            return self._free.pop()
        base = self.base or case_files_dir()
        path = base / f"screens-{self._made}"
        self._made += 1
        path.mkdir(mode=0o700)
        return path

    def release(self, path: Path) -> None:
        """Empty the directory for the next case (whose filmstrip must never show a frame
        of this one); one that cannot be emptied is not given out again."""
        try:
            with os.scandir(path) as entries:
                left = list(entries)
            for entry in left:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
        except OSError:
            return
        self._free.append(path)


@functools.cache
def screen_dirs() -> ScreenDirs:
    """This process's screen directories."""
    return ScreenDirs()


class Screens(Stage):
    name = "screens"

    def __init__(
        self,
        client: RunnerClient,
        *,
        send: bool = True,
        tick_s: float = TICK_S,
        dirs: ScreenDirs | None = None,
    ) -> None:
        self.client = client
        self.send = send
        self.tick_s = tick_s
        self.dirs = dirs or screen_dirs()
        self.directory: Path | None = None
        self.watcher: ScreenWatcher | None = None
        self.task: asyncio.Task[None] | None = None
        # True while the watcher looks at the directory (and sends a frame).
        self.looking = False
        self.refused: str | None = None
        self.sent = 0
        # The server's word on the next frame (a server that does not say it takes no blob
        # for a frame): the first frame of a case goes inline.
        self.keeps_next = False

    async def start(self, case: CaseContext) -> None:
        directory = self.directory = self.dirs.acquire()
        case.env[SCREEN_DIR_ENV] = str(directory)
        if not self.send:
            return
        limits = self.client.limits
        self.watcher = watcher = ScreenWatcher(
            directory, interval_ms=limits.screen_interval_ms, max_bytes=limits.max_screen_bytes
        )
        self.task = asyncio.create_task(self._watch(case, watcher), name="screens")

    async def finish(self, case: CaseContext) -> None:
        # The case has exited: the watcher ends by itself after the look it may be in.
        await self._stop(let_look_end=True)
        if self.watcher is not None and self.refused is None:
            # The last frame goes whatever the interval: the strip ends where the case did.
            await self._look(case, self.watcher, now_ms() + self.watcher.interval_ms)

    async def cleanup(self, case: CaseContext) -> None:
        await self._stop()
        if self.directory is not None:
            self.dirs.release(self.directory)
            self.directory = None

    async def _stop(self, *, let_look_end: bool = False) -> None:
        """Stop the watcher. Mid-look, with `let_look_end` (the case has exited, so the
        watcher ends after that look), the look ends first: a cancel would lose a frame it
        has taken (the last look would find nothing newer). Between looks it has taken
        nothing: cancelled, not waited for (its wake-up would keep the case's slot a few
        turns of a busy loop longer)."""
        task, self.task = self.task, None
        if task is None:
            return
        if task.done():
            # It saw the harness exit: nothing to wait for (its error, if any, raised here).
            if not task.cancelled():
                task.result()
            return
        if self.looking and let_look_end:
            await task
            return
        task.cancel()
        if self.looking:
            # Mid-look: over before the last look begins, its frame sent or not.
            await ended(task)
        # Otherwise it waits for its next tick: cancelled there, nothing to wait for.

    async def _watch(self, case: CaseContext, watcher: ScreenWatcher) -> None:
        while not case.exited.is_set() and self.refused is None:
            self.looking = True
            try:
                await self._look(case, watcher)
            finally:
                self.looking = False
            await wait_event(case.exited, self.tick_s)

    async def _look(
        self, case: CaseContext, watcher: ScreenWatcher, now: int | None = None
    ) -> None:
        if not _has_files(watcher.directory):
            return  # most harnesses never write a frame: no thread for them
        seen = await asyncio.to_thread(watcher.poll, now)
        if isinstance(seen, Skipped):
            case.note(f"⚠ screen {seen.name} not sent: {seen.reason}")
        elif isinstance(seen, Frame):
            await self._send(case, seen)

    async def _send(self, case: CaseContext, frame: Frame) -> None:
        try:
            blob = await self._uploaded(case, frame)
            ack = await report_case_screen(
                self.client,
                job_id=case.job.job_id,
                lease_epoch=case.job_run.epoch,
                media_type=frame.media_type,
                data=frame.data,
                taken_at=frame.taken_at,
                blob=blob,
            )
        except ServerUnavailable:
            return  # a newer frame goes at the next interval
        except ToolCallError as exc:
            case.note(f"⚠ screen {frame.name} refused: {exc}")
            return
        if not ack.accepted:
            self.refused = ack.reason
            return
        self.keeps_next = ack.keeps_next
        self.sent += 1

    async def _uploaded(self, case: CaseContext, frame: Frame) -> BlobRef | None:
        """The frame as a blob uploaded by `PUT`, when the filmstrip keeps it and it is too
        large to go inline well (both sides doing `raw_upload`); None: send it inline."""
        size = len(frame.data)
        if not self.keeps_next or size < RAW_UPLOAD_MIN_BYTES:
            return None
        if not self.client.offers("raw_upload"):
            return None
        digest = hashlib.sha256(frame.data).hexdigest()
        fence = JobFence(job_id=case.job.job_id, lease_epoch=case.job_run.epoch)
        try:
            await upload(self.client, fence, frame.data, digest, size, patience_s=UPLOAD_PATIENCE_S)
        except (UploadRefused, ToolCallError):
            return None  # inline, then: the call says why if it is refused too
        return BlobRef(sha256=digest, size=size, media_type=frame.media_type)


def _has_files(directory: Path) -> bool:
    try:
        with os.scandir(directory) as entries:
            return any(True for _ in entries)
    except OSError:
        return False
