"""Files while it runs (the fs rendezvous): the runner's side.

While any case runs, one `poll_case_fs_requests` long-poll is kept parked for every job held
(when cases start, a fresh poll takes over with the new set, at most every `REPOLL_S`; the
server ends the one parked before, which answers whatever it took, and it is cancelled if it
lingers; a case that ends needs no fresh poll). Each request
is answered from the case's working directory only: the path resolved and confined to it
(`runnercli.case.confine`: no `..`, no symlink out, no sibling whose name starts the same), a
file over `max_artifact_bytes` refused from its metadata before any byte is read, text redacted
with the member's `redact` patterns, the content uploaded as a blob of the job's workspace,
then the answer sent. With `--no-files` every request is answered with an error: the member
keeps the files here.

When the server offers `fs_answers`, a poll that took requests waits for their listings and
refusals and carries them in the next poll it sends (one call answers and parks again); a
file's answer, sent once its upload is done and its ack awaited, goes on its own, and so does
any answer whose poll was superseded or cancelled meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from runnercli.case.artifacts.globs import media_type
from runnercli.case.artifacts.upload import UploadRefused, upload
from runnercli.case.confine import ConfineError, Listing, describe, list_dir, read_file
from runnercli.case.files.calls import FS_ANSWERS, answer_case_fs_request, poll_case_fs_requests
from runnercli.client import RunnerError, ServerUnavailable
from runnercli.protocol import MAX_FS_ENTRIES, BlobRef, FsEntry, FsPosted, FsRequest, JobFence
from runnercli.protocol.world import fs_error
from runnercli.session import JobRun, Session

# How long one poll stays parked (a fresh one follows at once).
POLL_WAIT_MS = 25_000
# A server that cannot be reached is asked again after this long; one that refuses the poll
# (a server without the fs rendezvous) after much longer.
RETRY_S = 1.0
REFUSED_RETRY_S = 30.0
# How often at most a fresh poll takes over to add the cases started since the last one.
REPOLL_S = 1.0
# A superseded poll is given this long to come back (with what it took) before it is cancelled,
# and one parked while no case runs is kept this long for the next case.
GRACE_S = 2.0
# An answer is worth sending only while the page still waits for it.
UPLOAD_PATIENCE_S = 25.0
KEPT_HERE = "the member keeps this case's files on their machine (the runner runs with --no-files)"
CASE_OVER = "the case is over: its files are no longer here (its artifacts are on the case page)"


class _Outbox:
    """The answers to one poll's requests that the next poll carries: each request's answer
    is put here, or let go (sent on its own); `settled` once none is pending."""

    def __init__(self, requests: list[FsRequest]) -> None:
        self.pending = {request.request_id for request in requests}
        self.posts: list[FsPosted] = []
        self.open = True
        self.settled = asyncio.Event()
        self._check()

    def put(self, post: FsPosted) -> bool:
        if not self.open:
            return False
        self.posts.append(post)
        self.let_go(post.request_id)
        return True

    def let_go(self, request_id: str) -> None:
        self.pending.discard(request_id)
        self._check()

    def close(self) -> list[FsPosted]:
        """What it holds, no longer taking any."""
        self.open, posts, self.posts = False, self.posts, []
        return posts

    def _check(self) -> None:
        if not self.pending:
            self.settled.set()


class CaseFiles:
    """The jobs whose working directory may be read now, and the poll that serves them."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.changed = asyncio.Event()
        # The working directory of each job whose files may be read now, by its id (the
        # `Files` stage opens it, and closes it before the directory goes).
        self.workdirs: dict[int, Path] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # The poll the loop keeps parked now (one superseded carries no answers).
        self._current: asyncio.Task[None] | None = None

    def open(self, job_run: JobRun, workdir: Path) -> None:
        self.workdirs[job_run.job.job_id] = workdir
        self.changed.set()

    def close(self, job_run: JobRun) -> None:
        self.workdirs.pop(job_run.job.job_id, None)
        self.changed.set()

    def fences(self) -> list[JobFence]:
        return [
            JobFence(job_id=job_id, lease_epoch=job_run.epoch)
            for job_id, job_run in sorted(self.session.running.items())
            if job_id in self.workdirs
        ]

    async def run(self) -> None:
        """Keep a poll parked while any case runs, until cancelled."""
        poll: asyncio.Task[None] | None = None
        polled: set[tuple[int, int]] = set()
        loop = asyncio.get_running_loop()
        began = -REPOLL_S
        try:
            while True:
                fences = self.fences()
                self.changed.clear()
                live = poll is not None and not poll.done()
                if not fences:
                    # No case runs: the poll parked ends unless one starts within the grace
                    # (cases that follow one another keep it).
                    if poll is not None and live and not await self._changed_within(GRACE_S):
                        poll.cancel()
                        poll, polled = None, set()
                    elif not live:
                        await self.changed.wait()
                    continue
                if poll is not None and live:
                    if _pairs(fences) <= polled:
                        # Only cases that ended: the poll parked serves those still running
                        # (the server answers nothing for a job no longer leased at its epoch).
                        await self._until_changed_or(poll)
                        continue
                    if (settle := began + REPOLL_S - loop.time()) > 0:
                        # Cases starting one after another are added at most every REPOLL_S,
                        # not each by a call of its own.
                        await asyncio.sleep(settle)
                        continue
                    # Superseded: the server ends it once a fresh poll arrives (answering what
                    # it took meanwhile); one that lingers (a server that does not end it,
                    # another replica) is cancelled, never left parked.
                    loop.call_later(GRACE_S, poll.cancel)
                poll, polled, began = self._spawn(self._poll(fences)), _pairs(fences), loop.time()
                self._current = poll
                await self._until_changed_or(poll)
        finally:
            for task in list(self._tasks):
                task.cancel()

    async def _changed_within(self, seconds: float) -> bool:
        try:
            # Not `wait_for`: on Python 3.11 it drops a cancellation of the caller that comes
            # as the event is set, and the runner's stop cancels this task.
            async with asyncio.timeout(seconds):
                await self.changed.wait()
        except TimeoutError:
            return False
        return True

    async def _until_changed_or(self, poll: asyncio.Task[None]) -> None:
        changed = asyncio.ensure_future(self.changed.wait())
        await asyncio.wait([poll, changed], return_when=asyncio.FIRST_COMPLETED)
        changed.cancel()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _poll(self, fences: list[JobFence]) -> None:
        """Poll; with `fs_answers`, while this is the poll kept parked, poll again at once
        carrying the answers to what it took."""
        outbox: _Outbox | None = None
        try:
            while True:
                posts = outbox.close() if outbox is not None else []
                outbox = None
                try:
                    reply = await poll_case_fs_requests(
                        self.session.client, fences, POLL_WAIT_MS, posts
                    )
                except ServerUnavailable:
                    await asyncio.sleep(RETRY_S)
                    return
                except RunnerError:
                    await asyncio.sleep(REFUSED_RETRY_S)
                    return
                if reply.requests and FS_ANSWERS in self.session.client.server_features:
                    outbox = _Outbox(reply.requests)
                for request in reply.requests:
                    self._spawn(self.answer(request, outbox))
                if outbox is None:
                    return
                await outbox.settled.wait()
                if asyncio.current_task() is not self._current:
                    return
        finally:
            # Answers no poll will carry go on their own.
            for post in outbox.close() if outbox is not None else []:
                self._spawn(self._send(post))

    async def _send(self, post: FsPosted) -> None:
        fence = JobFence(job_id=post.job_id, lease_epoch=post.lease_epoch)
        with contextlib.suppress(RunnerError):
            await answer_case_fs_request(
                self.session.client,
                fence,
                post.request_id,
                entries=post.entries,
                error=post.error,
            )

    async def answer(self, request: FsRequest, outbox: _Outbox | None = None) -> None:
        """Answer one request (a failure to reach the server leaves the page to time out):
        a listing or a refusal put in `outbox` when it is given and open, else sent."""
        try:
            job_run = self.session.running.get(request.job_id)
            if job_run is None:
                return  # not held any more: the server refuses any answer for it
            fence = JobFence(job_id=request.job_id, lease_epoch=job_run.epoch)
            with contextlib.suppress(RunnerError):
                await self._answer(request, job_run, fence, outbox)
        finally:
            if outbox is not None:
                outbox.let_go(request.request_id)

    async def _reply(
        self,
        fence: JobFence,
        request: FsRequest,
        outbox: _Outbox | None,
        *,
        entries: list[FsEntry] | None = None,
        error: str | None = None,
    ) -> None:
        post = FsPosted(
            job_id=fence.job_id,
            lease_epoch=fence.lease_epoch,
            request_id=request.request_id,
            entries=entries,
            error=error[:500] if error is not None else None,
        )
        if outbox is None or not outbox.put(post):
            await self._send(post)

    async def _answer(
        self, request: FsRequest, job_run: JobRun, fence: JobFence, outbox: _Outbox | None
    ) -> None:
        client, workdir = self.session.client, self.workdirs.get(request.job_id)
        if self.session.options.no_files:
            error = fs_error("kept", KEPT_HERE)
        elif workdir is None:
            error = fs_error("not_found", CASE_OVER)
        else:
            try:
                found = await asyncio.to_thread(self._read, workdir, request)
                if isinstance(found, Listing):
                    entries = [FsEntry(**entry.to_dict()) for entry in found.entries]
                    await self._reply(fence, request, outbox, entries=entries)
                    return
                if outbox is not None:
                    outbox.let_go(request.request_id)  # a file's answer waits for its ack
                blob = await self._upload(fence, request.path, found)
                ack = await answer_case_fs_request(client, fence, request.request_id, blob=blob)
                if ack.accepted:
                    # The member sees on their terminal each file that left the machine.
                    self.session.status.event(
                        f"sent {request.path} ({blob.size} bytes) of {job_run.title} "
                        "to a workspace page that asked for it"
                    )
                return
            except ConfineError as exc:
                error = fs_error(exc.reason, str(exc))  # type: ignore[arg-type]
            except UploadRefused as exc:
                error = fs_error("refused", f"the server refused the file: {exc}")
        await self._reply(fence, request, outbox, error=error)

    def _read(self, workdir: Path, request: FsRequest) -> Listing | bytes:
        """A directory's listing or a file's content (redacted when it is text)."""
        if request.op == "list" or describe(workdir, request.path).kind == "dir":
            return list_dir(workdir, request.path, max_entries=MAX_FS_ENTRIES)
        limit = self.session.client.limits.max_artifact_bytes
        data = read_file(workdir, request.path, limit)
        redactor = self.session.options.redactor
        return redactor.bytes_if_text(data, media_type(request.path)) if redactor else data

    async def _upload(self, fence: JobFence, path: str, data: bytes) -> BlobRef:
        digest, kind = hashlib.sha256(data).hexdigest(), media_type(path)
        await upload(
            self.session.client,
            fence,
            data,
            digest,
            len(data),
            kind,
            abort=self.session.abort,
            patience_s=UPLOAD_PATIENCE_S,
        )
        return BlobRef(sha256=digest, size=len(data), media_type=kind)


def _pairs(fences: list[JobFence]) -> set[tuple[int, int]]:
    return {(fence.job_id, fence.lease_epoch) for fence in fences}
