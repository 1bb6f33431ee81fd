"""The live run page's WebSocket: new log lines and the run's state, pushed as they change.

The consumer follows the database, not a notification: every POLL_S it reads the log lines
after the last one sent and a cheap fingerprint of the run, and sends only what changed.
That works the same with one process or many replicas behind PostgreSQL, and nothing
that settles a run needs to know a page is watching it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from accounts.errors import NotFound
from accounts.fields import ascii_int
from runners.queue import run_job_counts
from scorecards.selectors import run_get, run_logs, run_reply

POLL_S = 0.5
# After a run ends, late log lines may still arrive for a moment; then the socket closes.
GRACE_S = 3.0
# The page shows an output preview at most; the full output is on the API.
OUTPUT_PREVIEW_CHARS = 500
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
CLOSE_SERVER_ERROR = 1011

log = logging.getLogger(__name__)


def live_reply(run: Any) -> dict[str, Any]:
    """The REST run reply with outputs cut to a preview, as the page shows them."""
    reply = run_reply(run).data()
    for result in reply["results"]:
        result["output"] = result["output"][:OUTPUT_PREVIEW_CHARS]
    return reply


class RunConsumer(AsyncJsonWebsocketConsumer):
    """`ws/runs/<id>/?after=<seq>`: session-authenticated, members of the run's workspace."""

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        self.run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        if self.user is None or not self.user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        try:
            await database_sync_to_async(run_get)(user=self.user, run_id=self.run_id)
        except NotFound:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        query = parse_qs(self.scope.get("query_string", b"").decode())
        after = query.get("after", ["0"])[0]
        self.after = ascii_int(after) or 0
        self.fingerprint: tuple[Any, ...] | None = None
        await self.accept()
        self.follower = asyncio.create_task(self.follow())

    async def disconnect(self, code: int) -> None:
        follower = getattr(self, "follower", None)
        if follower is not None:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower

    async def follow(self) -> None:
        ended_at: float | None = None
        loop = asyncio.get_running_loop()
        while True:
            try:
                lines, reply, terminal = await database_sync_to_async(self.changes)()
            except NotFound:
                # Removed from the workspace (or the run deleted) while watching.
                await self.close(code=CLOSE_NOT_FOUND)
                return
            except Exception:
                # Closing makes the page fall back to polling the API, which reports its own
                # errors; a silently dead follower would leave the page frozen.
                log.exception("following run %s failed", self.run_id)
                await self.close(code=CLOSE_SERVER_ERROR)
                return
            if lines:
                await self.send_json({"type": "logs", "lines": lines})
            if reply is not None:
                await self.send_json({"type": "run", "run": reply})
            if terminal and ended_at is None:
                ended_at = loop.time()
            if ended_at is not None and not lines and loop.time() - ended_at >= GRACE_S:
                await self.close()
                return
            if not lines:
                await asyncio.sleep(POLL_S)

    def changes(self) -> tuple[list[dict[str, Any]], dict[str, Any] | None, bool]:
        """What changed since the last pass: new log lines, and the run if it moved."""
        lines = [
            line.data() for line in run_logs(user=self.user, run_id=self.run_id, after=self.after)
        ]
        if lines:
            self.after = lines[-1]["seq"]
        run = run_get(user=self.user, run_id=self.run_id)
        fingerprint = (
            run.status,
            run.results.count(),
            run.events.count(),
            tuple(sorted(run_job_counts(run.pk).items())),
        )
        if fingerprint == self.fingerprint:
            return lines, None, run.is_terminal
        self.fingerprint = fingerprint
        return lines, live_reply(run), run.is_terminal
