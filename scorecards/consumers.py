"""The live run page's WebSocket: only what changed since the page's last sequence numbers.

The page connects with the last log line, result and event it shows
(`?after=&results_after=&events_after=`); the consumer follows the database, not a
notification: every POLL_S it reads what came after those numbers and sends it —
`logs`, `results` (outputs cut to a preview), and `run` (status, summary and new events)
when the run moved. That works the same with one process or many replicas behind
PostgreSQL, nothing that settles a run needs to know a page is watching it, and an update of
a 10,000-case run costs what changed, not the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from core.errors import Invalid, NotFound
from core.fields import query_int
from scorecards.live import Watch, run_changes
from scorecards.selectors.runs import run_get

POLL_S = 0.5
# After a run ends, late log lines may still arrive for a moment; then the socket closes.
GRACE_S = 3.0
CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
# A sequence number that is not ASCII digits.
CLOSE_BAD_REQUEST = 4400
AFTER = ("after", "results_after", "events_after")
CLOSE_SERVER_ERROR = 1011

log = logging.getLogger(__name__)


def _watch(query_string: bytes) -> Watch:
    """Where the page stands (`?after=&results_after=&events_after=`, 0 when absent)."""
    query = parse_qs(query_string.decode())
    after = {name: query_int(name, query.get(name, [""])[0], default=0) for name in AFTER}
    return Watch(
        logs_after=after["after"],
        results_after=after["results_after"],
        events_after=after["events_after"],
    )


class RunConsumer(AsyncJsonWebsocketConsumer):
    """`ws/runs/<id>/?after=&results_after=&events_after=`: session-authenticated, members of
    the run's workspace."""

    async def connect(self) -> None:
        self.user = self.scope.get("user")
        # The route's `int` converter made it a number already.
        self.run_id: int = self.scope["url_route"]["kwargs"]["run_id"]
        if self.user is None or not self.user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        try:
            await database_sync_to_async(run_get)(user=self.user, run_id=self.run_id)
        except NotFound:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        try:
            self.watch = _watch(self.scope.get("query_string", b""))
        except Invalid:
            await self.close(code=CLOSE_BAD_REQUEST)
            return
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
                messages, more, terminal = await database_sync_to_async(self.changes)()
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
            for message in messages:
                await self.send_json(message)
            if terminal and ended_at is None:
                ended_at = loop.time()
            quiet = not more and not any(m["type"] == "logs" for m in messages)
            if ended_at is not None and quiet and loop.time() - ended_at >= GRACE_S:
                await self.close()
                return
            if not more:
                await asyncio.sleep(POLL_S)

    def changes(self) -> tuple[list[dict[str, Any]], bool, bool]:
        """What changed since the last pass, whether more is waiting, and whether the run
        has ended."""
        run = run_get(user=self.user, run_id=self.run_id)
        messages, more = run_changes(user=self.user, run=run, watch=self.watch)
        return messages, more, run.is_terminal
