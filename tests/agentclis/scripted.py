"""A model endpoint that answers from a script, for the real agent CLIs to talk to.

The CLI runs its own agent loop against it: each request is one turn, and the endpoint answers
the turn the conversation has reached (counted from the history the request carries, so a
retried request gets the same answer) — a final text, one or more tool calls, an HTTP error,
or a stream that breaks off. Every request is recorded, headers and body, so a test can say
what the CLI sent. The wire formats (Anthropic Messages, OpenAI Responses) are subclasses.
"""

from __future__ import annotations

import json
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Turn:
    """One answer of the endpoint: a reply of the model (`Text`, `ToolCall`, or several of
    them in a tuple), an `HttpError` or a `StreamError`."""


class Reply(Turn):
    """What a model's reply is made of: a `Text` or a `ToolCall`."""


@dataclass(frozen=True)
class Text(Reply):
    """The model's final answer: a turn that calls no tool ends the CLI's loop."""

    text: str


@dataclass(frozen=True)
class ToolCall(Reply):
    """A call of one of the CLI's tools; `input` is a JSON object, or the raw text a custom
    (freeform) tool takes, as Codex's `apply_patch`."""

    name: str
    input: Mapping[str, Any] | str


@dataclass(frozen=True)
class HttpError(Turn):
    """The endpoint refuses the request. `times`: how many requests get it before the turn's
    next entry is used (None: every one, as a plan limit that has not reset)."""

    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)
    times: int | None = None


@dataclass(frozen=True)
class StreamError(Turn):
    """A 200 whose stream starts, then reports an error and ends (an overloaded model)."""

    message: str
    kind: str = "overloaded_error"


Block = Text | ToolCall
Script = Sequence[Turn | tuple[Reply, ...]]


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float

    @property
    def text(self) -> str:
        """The whole request body as text, to look for what reached the model."""
        return json.dumps(self.body)


class ScriptedEndpoint(ABC):
    """One scripted model endpoint on 127.0.0.1, started with `serve()`.

    `scripts` is one script (a list of turns), or several keyed by a marker: a conversation
    whose first user message contains a marker gets that script (markers are tried in order,
    so a judge's marker goes before the case's, whose input a judge's prompt quotes); the
    marker "" matches any conversation. `answers` are fixed JSON answers on other paths (a
    login's token refresh); every other path is a 404.
    """

    paths: tuple[str, ...] = ()

    def __init__(
        self,
        scripts: Script | Mapping[str, Script],
        *,
        answers: Mapping[str, Any] | None = None,
    ) -> None:
        self.answers = dict(answers or {})
        self.scripts: dict[str, list[Turn | tuple[Reply, ...]]] = (
            {marker: list(turns) for marker, turns in scripts.items()}
            if isinstance(scripts, Mapping)
            else {"": list(scripts)}
        )
        self.received: list[Received] = []
        self.url = ""
        self._served_errors: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    # What a wire format says: how far a conversation has come, what its user said first,
    # and how to write each kind of answer.
    @abstractmethod
    def turn_index(self, body: Any) -> int:
        raise NotImplementedError

    @abstractmethod
    def first_user_text(self, body: Any) -> str:
        raise NotImplementedError

    @abstractmethod
    def stream(self, blocks: tuple[Block, ...], body: Any, index: int) -> Iterator[bytes]:
        raise NotImplementedError

    def streams(self, body: Any) -> bool:
        """Whether the request asks for a stream (else the whole answer as one JSON body)."""
        return True

    def whole(self, blocks: tuple[Block, ...], body: Any, index: int) -> Any:
        raise NotImplementedError(f"{type(self).__name__} answers only streams")

    @abstractmethod
    def broken_stream(self, error: StreamError, body: Any) -> Iterator[bytes]:
        raise NotImplementedError

    @abstractmethod
    def error_body(self, status: int, message: str) -> Any:
        raise NotImplementedError

    @contextmanager
    def serve(self) -> Iterator[ScriptedEndpoint]:
        server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
        thread.start()
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)

    def requests(self, path: str | None = None) -> list[Received]:
        """The model requests received (those on this format's paths), or those on `path`."""
        wanted = (path,) if path else self.paths
        return [r for r in self.received if r.path.split("?")[0] in wanted]

    def _answer(self, body: Any) -> Turn | tuple[Reply, ...]:
        first = self.first_user_text(body)
        marker = next((m for m in self.scripts if m in first), None)
        if marker is None:
            return HttpError(400, self.error_body(400, "no script for this conversation"))
        index = self.turn_index(body)
        turns = self.scripts[marker]
        while index < len(turns):
            turn = turns[index]
            if not isinstance(turn, HttpError) or turn.times is None:
                return turn
            with self._lock:
                served = self._served_errors.get((marker, index), 0)
                if served < turn.times:
                    self._served_errors[(marker, index)] = served + 1
                    return turn
            index += 1
        return HttpError(400, self.error_body(400, f"the script has no turn {index}"))

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._record(None)
                self._send_json(404, endpoint.error_body(404, f"no such path {self.path}"))

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = raw.decode(errors="replace")
                self._record(body)
                path = self.path.split("?")[0]
                if path in endpoint.answers:
                    self._send_json(200, endpoint.answers[path])
                    return
                if path not in endpoint.paths:
                    self._send_json(404, endpoint.error_body(404, f"no such path {self.path}"))
                    return
                turn = endpoint._answer(body)
                streams = endpoint.streams(body)
                if isinstance(turn, HttpError):
                    self._send_json(turn.status, turn.body, turn.headers)
                elif isinstance(turn, StreamError) and streams:
                    self._send_stream(endpoint.broken_stream(turn, body))
                elif isinstance(turn, StreamError):
                    # What breaks a stream is, without one, the API's error status.
                    status = 529 if turn.kind == "overloaded_error" else 500
                    self._send_json(status, endpoint.error_body(status, turn.message))
                else:
                    blocks = _blocks(turn)
                    index = endpoint.turn_index(body)
                    if streams:
                        self._send_stream(endpoint.stream(blocks, body, index))
                    else:
                        self._send_json(200, endpoint.whole(blocks, body, index))

            def _record(self, body: Any) -> None:
                headers = {k.lower(): v for k, v in self.headers.items()}
                received = Received(self.command, self.path, headers, body, time.monotonic())
                with endpoint._lock:
                    endpoint.received.append(received)

            def _send_json(
                self, status: int, body: Any, headers: Mapping[str, str] | None = None
            ) -> None:
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _send_stream(self, events: Iterator[bytes]) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for event in events:
                    self.wfile.write(event)
                    self.wfile.flush()
                self.close_connection = True

        return Handler


def _blocks(turn: Turn | tuple[Reply, ...]) -> tuple[Block, ...]:
    parts = turn if isinstance(turn, tuple) else (turn,)
    blocks = tuple(part for part in parts if isinstance(part, Text | ToolCall))
    assert len(blocks) == len(parts), f"a reply is made of texts and tool calls: {turn!r}"
    return blocks


def sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
