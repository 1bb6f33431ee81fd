"""A fake of the server's blob tools at the network boundary: the workspace's blobs and
partial uploads in memory, with the server's rules (offsets, the digest on `final`), calls
recorded, and connections that drop when the test says so."""

from __future__ import annotations

import base64
import hashlib
from typing import Any, TypeVar

from pydantic import BaseModel

from runnercli.client import ServerUnavailable
from runnercli.protocol import BlobAck, BlobHoldings, Limits
from tests.runnercli.fakes import FakeClient

ModelT = TypeVar("ModelT", bound=BaseModel)


class BlobServerClient(FakeClient):
    def __init__(self, chunk_bytes: int = 1000) -> None:
        super().__init__()
        self.limits = Limits(max_blob_chunk_bytes=chunk_bytes)
        self.blobs: dict[str, bytes] = {}
        self.partial: dict[str, bytearray] = {}
        # put_blob calls (by their 1-based number) after which the reply is lost: the chunk
        # is stored, the caller sees a dropped connection.
        self.drop_after: set[int] = set()
        self.puts = 0

    def hold(self, data: bytes) -> str:
        sha = hashlib.sha256(data).hexdigest()
        self.blobs[sha] = data
        return sha

    async def call(
        self, tool: str, args: dict[str, Any], model: type[ModelT], wait_s: float = 0.0
    ) -> ModelT:
        self.calls.append((tool, args))
        if self.script[tool]:
            answer = self.script[tool].pop(0)
            if isinstance(answer, BaseException):
                raise answer
            return model.model_validate(answer.model_dump())
        reply = self._have(args) if tool == "have_blobs" else self._put(args)
        return model.model_validate(reply.model_dump())

    def _have(self, args: dict[str, Any]) -> BlobHoldings:
        missing = [sha for sha in args["sha256"] if sha not in self.blobs]
        partial = {sha: len(self.partial[sha]) for sha in missing if self.partial.get(sha)}
        return BlobHoldings(missing=missing, partial=partial)

    def _put(self, args: dict[str, Any]) -> BlobAck:
        self.puts += 1
        sha, offset = args["sha256"], args["offset"]
        data = base64.b64decode(args["data"])
        if sha in self.blobs:
            return BlobAck(accepted=True, stored=len(self.blobs[sha]))
        held = self.partial.setdefault(sha, bytearray())
        if offset != len(held):
            return BlobAck(accepted=False, reason="offset", stored=len(held))
        held += data
        stored = len(held)
        if args["final"]:
            whole = bytes(self.partial.pop(sha))
            if hashlib.sha256(whole).hexdigest() != sha:
                return BlobAck(accepted=False, reason="the bytes sent hash to something else")
            self.blobs[sha] = whole
        if self.puts in self.drop_after:
            raise ServerUnavailable("connection reset")
        return BlobAck(accepted=True, stored=stored)

    def put_offsets(self) -> list[int]:
        return [args["offset"] for tool, args in self.calls if tool == "put_blob"]
