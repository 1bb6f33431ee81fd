"""Claude Code's `--output-format stream-json --verbose` stdout, parsed as it streams.

Each line is one message: `system` (`init` first), `assistant` (content blocks `text`,
`thinking`, `tool_use`), `user` (`tool_result` blocks answering a `tool_use` by its id), and
last `result` (`subtype` `success` or `error_…`, the final `result` text, `total_cost_usd`,
`usage`, `duration_ms`, `num_turns`, `is_error`). `stream_event` lines (partial messages) are
skipped: the whole message follows them. The final result's text is the case's output and
its usage the case's usage, whatever the trace's bounds kept. A `result` with `is_error` (the
model API refused: "API Error: 400 …", a plan limit) ends the case as an error quoting it; a
turn limit (`error_max_turns`) is what stopped the agent, not an error of the case.
"""

from __future__ import annotations

from typing import Any

from runnercli.case.trace.content import content_text, media_note, unknown_type
from runnercli.case.trace.events import Draft
from runnercli.case.trace.lines import JsonLinesParser

RESULT_FIELDS = (
    "subtype",
    "is_error",
    "total_cost_usd",
    "usage",
    "modelUsage",
    "duration_ms",
    "duration_api_ms",
    "num_turns",
    "session_id",
)
USAGE_NUMBERS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
RESULT_NUMBERS = ("total_cost_usd", "duration_ms", "duration_api_ms", "num_turns")
# A result that is an error but not of the case: the agent was stopped by its turn limit.
STOPPED_SUBTYPES = frozenset({"error_max_turns"})


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class ClaudeStreamParser(JsonLinesParser):
    """Drafts of a Claude Code stream-json session; tool results paired to their calls."""

    def __init__(self) -> None:
        super().__init__()
        # Open tool calls by their `tool_use` id: the tool's name and when the call arrived.
        self._calls: dict[str, tuple[str, int]] = {}
        self._result: dict[str, Any] | None = None

    def on_object(self, obj: dict[str, Any], ts: int) -> list[Draft]:
        kind = obj.get("type")
        if kind == "system":
            return [self._system(obj, ts)]
        if kind == "assistant":
            return self._assistant(obj, ts)
        if kind == "user":
            return self._user(obj, ts)
        if kind == "result":
            return self._final(obj, ts)
        if kind == "stream_event":
            return []
        return [unknown_type(obj, ts)]

    def final_output(self) -> str | None:
        """The final result's text (the grader's input), once the result line has come."""
        text = (self._result or {}).get("result")
        return text if isinstance(text, str) else None

    def final_usage(self) -> dict[str, Any] | None:
        """Tokens and cost of the whole session, from the final result line."""
        if self._result is None:
            return None
        usage = self._result.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        found = {k: usage[k] for k in USAGE_NUMBERS if _number(usage.get(k))}
        found |= {k: self._result[k] for k in RESULT_NUMBERS if _number(self._result.get(k))}
        return found

    def final_error(self) -> str | None:
        """What the final result says went wrong, when it is an error (the API's message)."""
        result = self._result
        if result is None or result.get("subtype") in STOPPED_SUBTYPES:
            return None
        if not result.get("is_error") and result.get("subtype") == "success":
            return None
        text = result.get("result")
        if isinstance(text, str) and text.strip():
            return text
        errors = result.get("errors")
        if isinstance(errors, list) and errors:
            return "; ".join(str(error) for error in errors)
        return f"Claude Code ended with {result.get('subtype') or 'an error'}"

    def open_calls(self) -> list[str]:
        """The names of the tool calls still waiting for their result, oldest first."""
        return [name for name, _ in self._calls.values()]

    def _system(self, obj: dict[str, Any], ts: int) -> Draft:
        subtype = obj.get("subtype")
        name = "init" if subtype == "init" else f"system:{subtype}"
        return Draft("message", name, {k: v for k, v in obj.items() if k != "type"}, ts)

    def _assistant(self, obj: dict[str, Any], ts: int) -> list[Draft]:
        blocks = _blocks(obj)
        if blocks is None:
            return [unknown_type(obj, ts)]
        parent = obj.get("parent_tool_use_id")
        drafts = [self._assistant_block(block, ts) for block in blocks]
        if obj.get("error"):
            # The API call behind the message failed (rate limit, authentication, …).
            drafts.append(Draft("error", "assistant", {"error": obj["error"]}, ts))
        if parent:
            # A subagent's step: it belongs under the Task call that started it.
            for draft in drafts:
                draft.data["parent_tool_use_id"] = parent
        return drafts

    def _assistant_block(self, block: Any, ts: int) -> Draft:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            return Draft("message", "assistant", {"text": block.get("text", "")}, ts)
        if kind == "thinking":
            return Draft("message", "thinking", {"text": block.get("thinking", "")}, ts)
        if kind == "redacted_thinking":
            return Draft("message", "thinking", {"redacted": True}, ts)
        if kind == "tool_use":
            call_id, name = str(block.get("id", "")), str(block.get("name", "tool"))
            self._calls[call_id] = (name, ts)
            return Draft("tool_call", name, {"id": call_id, "input": block.get("input")}, ts)
        return Draft("raw", f"assistant:{kind}", {"block": media_note(block)}, ts)

    def _user(self, obj: dict[str, Any], ts: int) -> list[Draft]:
        blocks = _blocks(obj)
        if blocks is None:
            return [unknown_type(obj, ts)]
        drafts: list[Draft] = []
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "tool_result":
                drafts.append(self._tool_result(block, ts))
            elif kind == "text":
                drafts.append(Draft("message", "user", {"text": block.get("text", "")}, ts))
            else:
                drafts.append(Draft("raw", f"user:{kind}", {"block": media_note(block)}, ts))
        return drafts

    def _tool_result(self, block: dict[str, Any], ts: int) -> Draft:
        call_id = str(block.get("tool_use_id", ""))
        name, started = self._calls.pop(call_id, ("tool", None))
        data: dict[str, Any] = {
            "call_id": call_id,
            "is_error": bool(block.get("is_error")),
            "content": content_text(block.get("content")),
        }
        if started is not None:
            data["duration_ms"] = max(0, ts - started)
        return Draft("tool_result", name, data, ts)

    def _final(self, obj: dict[str, Any], ts: int) -> list[Draft]:
        self._result = obj
        summary = {k: obj[k] for k in RESULT_FIELDS if k in obj}
        drafts = [Draft("usage", "result", summary, ts)]
        subtype = obj.get("subtype")
        if obj.get("is_error") or subtype != "success":
            detail = {"subtype": subtype, "errors": obj.get("errors"), "result": obj.get("result")}
            drafts.append(Draft("error", str(subtype or "result"), detail, ts))
        return drafts


def _blocks(obj: dict[str, Any]) -> list[Any] | None:
    """A message's content blocks (a bare string is one text block), or None when malformed."""
    message = obj.get("message")
    if not isinstance(message, dict):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else None
