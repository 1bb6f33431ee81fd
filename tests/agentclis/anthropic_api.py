"""The Anthropic Messages API, scripted: what Claude Code calls (`POST /v1/messages`, streamed).

Each answer is the Messages SSE sequence — `message_start` (with the usage Claude Code prices
the turn from), a content block per text or tool call (`text_delta`, `input_json_delta`),
`message_delta` (`stop_reason`, output tokens), `message_stop`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tests.agentclis.scripted import Block, ScriptedEndpoint, StreamError, Text, sse

# What every turn reports it used: small, fixed numbers, so a cost is predictable.
INPUT_TOKENS = 1000
OUTPUT_TOKENS = 100


def error_body(kind: str, message: str) -> dict[str, Any]:
    """An Anthropic API error body (`invalid_request_error`, `rate_limit_error`, …)."""
    return {"type": "error", "error": {"type": kind, "message": message}}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))


class AnthropicEndpoint(ScriptedEndpoint):
    paths = ("/v1/messages",)

    def turn_index(self, body: Any) -> int:
        return sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")

    def first_user_text(self, body: Any) -> str:
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        return _text_of(users[0]["content"]) if users else ""

    def error_body(self, status: int, message: str) -> Any:
        if status == 529:
            return error_body("overloaded_error", message)
        return error_body("invalid_request_error" if status < 500 else "api_error", message)

    def streams(self, body: Any) -> bool:
        # Claude Code asks without `stream` when it falls back after a broken stream.
        return bool(body.get("stream"))

    def whole(self, blocks: tuple[Block, ...], body: Any, index: int) -> Any:
        content: list[dict[str, Any]] = []
        for n, block in enumerate(blocks):
            if isinstance(block, Text):
                content.append({"type": "text", "text": block.text})
            else:
                content.append(
                    {
                        "type": "tool_use",
                        "id": f"toolu_scripted_{index}_{n}",
                        "name": block.name,
                        "input": block.input,
                    }
                )
        calls = any(not isinstance(block, Text) for block in blocks)
        return {
            **self._message(body, index),
            "content": content,
            "stop_reason": "tool_use" if calls else "end_turn",
            "usage": {**self._message(body, index)["usage"], "output_tokens": OUTPUT_TOKENS},
        }

    def _message(self, body: Any, index: int) -> dict[str, Any]:
        return {
            "id": f"msg_scripted_{index}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-sonnet-4-5"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": INPUT_TOKENS,
                "output_tokens": 1,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
            },
        }

    def _start(self, body: Any, index: int) -> bytes:
        message = self._message(body, index)
        return sse("message_start", {"type": "message_start", "message": message})

    def stream(self, blocks: tuple[Block, ...], body: Any, index: int) -> Iterator[bytes]:
        yield self._start(body, index)
        for n, block in enumerate(blocks):
            start: dict[str, Any]
            if isinstance(block, Text):
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block.text}
            else:
                start = {
                    "type": "tool_use",
                    "id": f"toolu_scripted_{index}_{n}",
                    "name": block.name,
                    "input": {},
                }
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block.input)}
            yield sse(
                "content_block_start",
                {"type": "content_block_start", "index": n, "content_block": start},
            )
            yield sse(
                "content_block_delta", {"type": "content_block_delta", "index": n, "delta": delta}
            )
            yield sse("content_block_stop", {"type": "content_block_stop", "index": n})
        calls = any(not isinstance(block, Text) for block in blocks)
        stop = "tool_use" if calls else "end_turn"
        yield sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": OUTPUT_TOKENS},
            },
        )
        yield sse("message_stop", {"type": "message_stop"})

    def broken_stream(self, error: StreamError, body: Any) -> Iterator[bytes]:
        yield self._start(body, self.turn_index(body))
        yield sse("error", error_body(error.kind, error.message))
