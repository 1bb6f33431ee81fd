"""What uploads of blobs share: their outcome, their refusal, reading a chunk of the
source, and the patience with a server out of reach."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from runnercli.case.artifacts.shelf import Source
from runnercli.client.backoff import Backoff
from runnercli.tasks import wait_event

UPLOAD_BACKOFF_CAP_S = 10.0
# A server that keeps moving the resume point without progress is not followed for ever.
MAX_RESUMES = 5


class UploadRefused(Exception):
    """The server refused the blob for good (over its limit, a digest that does not match,
    the lease lost); the message is its reason."""


@dataclass
class Uploaded:
    """What an upload did: the chunks it sent and their bytes (none when the server held the
    blob already)."""

    sha256: str
    chunks: int = 0
    sent_bytes: int = 0

    @property
    def held_already(self) -> bool:
        return self.chunks == 0


def read_chunk(source: Source, offset: int, size: int) -> bytes:
    if isinstance(source, bytes):
        return source[offset : offset + size]
    with source.open("rb") as handle:
        handle.seek(offset)
        return handle.read(size)


class Waiting:
    """Backoff while the server is out of reach, within a patience and until an abort."""

    def __init__(self, abort: asyncio.Event | None, patience_s: float) -> None:
        self.abort = abort or asyncio.Event()
        self.deadline = time.monotonic() + patience_s
        self.backoff = Backoff(cap_s=UPLOAD_BACKOFF_CAP_S)

    async def wait(self) -> bool:
        """Wait before the next try; False when there is no more patience."""
        if self.abort.is_set() or time.monotonic() > self.deadline:
            return False
        delay = min(self.backoff.next_delay(), max(0.0, self.deadline - time.monotonic()))
        await wait_event(self.abort, delay)
        return not self.abort.is_set()
