"""The OpenAI Responses API, scripted: what Codex calls (`POST /v1/responses`, streamed).

Each answer is the Responses SSE sequence Codex reads — `response.created`, then per output
item `response.output_item.added` and `response.output_item.done` (a `message` with
`output_text` deltas, a `function_call` with JSON `arguments`, or a `custom_tool_call` with
freeform `input`, as `apply_patch` takes), then `response.completed` with the usage Codex
sums into `turn.completed`. A broken stream ends with `response.failed`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tests.agentclis.scripted import Block, ScriptedEndpoint, StreamError, Text, sse

INPUT_TOKENS = 1000
CACHED_INPUT_TOKENS = 200
OUTPUT_TOKENS = 100
REASONING_TOKENS = 10
# Items the model wrote: a run of them (after the user's message or the tools' outputs) is
# one turn of the model.
MODEL_ITEMS = ("function_call", "custom_tool_call", "reasoning", "local_shell_call")


def error_body(message: str, kind: str = "invalid_request_error", **extra: Any) -> dict[str, Any]:
    """An OpenAI API error body; `extra` adds fields (`code`, `plan_type`, `resets_at`)."""
    return {"error": {"type": kind, "message": message, **extra}}


def _is_model_item(item: Any) -> bool:
    kind = item.get("type")
    if kind == "message":
        return item.get("role") == "assistant"
    return kind in MODEL_ITEMS


def _text_of(item: Any) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


class ResponsesEndpoint(ScriptedEndpoint):
    # The API (an API key, or a custom provider) and ChatGPT's backend (a ChatGPT login).
    paths = ("/v1/responses", "/backend-api/codex/responses")

    def turn_index(self, body: Any) -> int:
        turns, in_model_run = 0, False
        for item in body.get("input", []):
            model = _is_model_item(item)
            if model and not in_model_run:
                turns += 1
            in_model_run = model
        return turns

    def first_user_text(self, body: Any) -> str:
        users = [
            _text_of(item)
            for item in body.get("input", [])
            if item.get("type", "message") == "message" and item.get("role") == "user"
        ]
        return "\n".join(users)

    def error_body(self, status: int, message: str) -> Any:
        return error_body(message, "invalid_request_error" if status < 500 else "server_error")

    def _item(self, block: Block, index: int, n: int) -> dict[str, Any]:
        if isinstance(block, Text):
            return {
                "type": "message",
                "id": f"msg_scripted_{index}_{n}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": block.text, "annotations": []}],
            }
        if isinstance(block.input, str):
            return {
                "type": "custom_tool_call",
                "id": f"ctc_scripted_{index}_{n}",
                "call_id": f"call_scripted_{index}_{n}",
                "name": block.name,
                "input": block.input,
                "status": "completed",
            }
        return {
            "type": "function_call",
            "id": f"fc_scripted_{index}_{n}",
            "call_id": f"call_scripted_{index}_{n}",
            "name": block.name,
            "arguments": json.dumps(block.input),
            "status": "completed",
        }

    def _response(self, body: Any, index: int, status: str) -> dict[str, Any]:
        return {
            "id": f"resp_scripted_{index}",
            "object": "response",
            "status": status,
            "model": body.get("model", ""),
            "output": [],
        }

    def stream(self, blocks: tuple[Block, ...], body: Any, index: int) -> Iterator[bytes]:
        yield sse(
            "response.created",
            {"type": "response.created", "response": self._response(body, index, "in_progress")},
        )
        for n, block in enumerate(blocks):
            item = self._item(block, index, n)
            added = {**item, "status": "in_progress"}
            yield sse(
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": n, "item": added},
            )
            if isinstance(block, Text):
                yield sse(
                    "response.output_text.delta",
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": n,
                        "content_index": 0,
                        "delta": block.text,
                    },
                )
            yield sse(
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": n, "item": item},
            )
        completed = self._response(body, index, "completed")
        completed["usage"] = {
            "input_tokens": INPUT_TOKENS,
            "input_tokens_details": {"cached_tokens": CACHED_INPUT_TOKENS},
            "output_tokens": OUTPUT_TOKENS,
            "output_tokens_details": {"reasoning_tokens": REASONING_TOKENS},
            "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS,
        }
        yield sse("response.completed", {"type": "response.completed", "response": completed})

    def broken_stream(self, error: StreamError, body: Any) -> Iterator[bytes]:
        index = self.turn_index(body)
        yield sse(
            "response.created",
            {"type": "response.created", "response": self._response(body, index, "in_progress")},
        )
        failed = self._response(body, index, "failed")
        failed["error"] = {"code": error.kind, "message": error.message}
        yield sse("response.failed", {"type": "response.failed", "response": failed})
