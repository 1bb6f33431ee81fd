"""Codex's `codex exec --json` stdout (JSON lines of thread events), parsed as it streams.

Events: `thread.started`, `turn.started`, `turn.completed` (`usage`: `input_tokens`,
`cached_input_tokens`, `output_tokens`), `turn.failed`, `error`, and `item.started` /
`item.updated` / `item.completed` carrying an item `{id, type, …}`: `agent_message`,
`reasoning`, `command_execution` (`command`, `aggregated_output`, `exit_code`, `status`),
`file_change` (`changes`, `status`; only ever completed), `mcp_tool_call`, `web_search`,
`todo_list`, `error`. The last agent message is the case's output; usage sums the turns. A
`turn.failed` (the model API refused, a plan limit, a stream that broke off for good) ends the
case as an error quoting its message; `error` lines before it ("Reconnecting... 1/5") do not.
"""

from __future__ import annotations

from typing import Any

from runnercli.case.trace.content import unknown_type
from runnercli.case.trace.events import Draft
from runnercli.case.trace.lines import JsonLinesParser

TOOL_ITEMS = frozenset(
    {"command_execution", "file_change", "mcp_tool_call", "web_search", "collab_tool_call"}
)
USAGE_FIELDS = ("input_tokens", "cached_input_tokens", "output_tokens")
FAILED = frozenset({"failed", "declined"})


class CodexJsonParser(JsonLinesParser):
    """Drafts of a Codex exec session; a tool item's start and completion paired by its id."""

    def __init__(self) -> None:
        super().__init__()
        # Tool items started and not completed: when each started.
        self._calls: dict[str, int] = {}
        self._output: str | None = None
        self._usage: dict[str, int] | None = None
        # The message of the last `turn.failed`, unless a turn completed after it.
        self._failed: str | None = None

    def on_object(self, obj: dict[str, Any], ts: int) -> list[Draft]:
        kind = obj.get("type")
        item = obj.get("item")
        if isinstance(kind, str) and kind.startswith("item.") and isinstance(item, dict):
            return self._item(kind.removeprefix("item."), item, ts)
        if kind == "thread.started":
            return [Draft("message", "thread", {"thread_id": obj.get("thread_id")}, ts)]
        if kind == "turn.started":
            return [Draft("message", "turn", {"status": "started"}, ts)]
        if kind == "turn.completed":
            self._failed = None
            return [self._turn_usage(obj, ts)]
        if kind in ("turn.failed", "error"):
            error = obj.get("error")
            message = error.get("message") if isinstance(error, dict) else obj.get("message")
            if kind == "turn.failed":
                self._failed = str(message) if message else "Codex's turn failed"
            return [Draft("error", str(kind), {"message": message}, ts)]
        return [unknown_type(obj, ts)]

    def final_output(self) -> str | None:
        """The last agent message's text (the grader's input)."""
        return self._output

    def final_usage(self) -> dict[str, Any] | None:
        """Tokens summed over every completed turn."""
        return dict(self._usage) if self._usage is not None else None

    def final_error(self) -> str | None:
        """The message of the turn that failed and ended the session, if one did."""
        return self._failed

    def _turn_usage(self, obj: dict[str, Any], ts: int) -> Draft:
        usage = obj.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        total = self._usage if self._usage is not None else dict.fromkeys(USAGE_FIELDS, 0)
        for field in USAGE_FIELDS:
            value = usage.get(field)
            if isinstance(value, int) and not isinstance(value, bool):
                total[field] += value
        self._usage = total
        return Draft("usage", "turn", {"usage": usage}, ts)

    def _item(self, phase: str, item: dict[str, Any], ts: int) -> list[Draft]:
        kind = item.get("type")
        if kind in TOOL_ITEMS:
            return self._tool_item(phase, item, ts)
        if kind == "todo_list":
            return [Draft("message", "todo_list", {"items": item.get("items"), "phase": phase}, ts)]
        if phase != "completed":
            return []
        if kind == "agent_message":
            self._output = str(item.get("text", ""))
            return [Draft("message", "assistant", {"text": self._output}, ts)]
        if kind in ("reasoning", "plan"):
            name = "thinking" if kind == "reasoning" else "plan"
            return [Draft("message", name, {"text": item.get("text", "")}, ts)]
        if kind == "error":
            return [Draft("error", "error", {"message": item.get("message")}, ts)]
        return [Draft("raw", f"item:{kind}", {"item": item}, ts)]

    def _tool_item(self, phase: str, item: dict[str, Any], ts: int) -> list[Draft]:
        item_id, name = str(item.get("id", "")), tool_name(item)
        if phase == "started":
            self._calls[item_id] = ts
            return [Draft("tool_call", name, call_data(item), ts)]
        if phase != "completed":
            return []
        drafts: list[Draft] = []
        if item_id not in self._calls:
            # Completed without a start (a file change always is): the call, then its result.
            drafts.append(Draft("tool_call", name, call_data(item), ts))
        started = self._calls.pop(item_id, ts)
        drafts.append(Draft("tool_result", name, result_data(item, ts - started), ts))
        return drafts


def tool_name(item: dict[str, Any]) -> str:
    """The name a tool item shows under: Codex's own tool names where it has them."""
    kind = item.get("type")
    if kind == "command_execution":
        return "shell"
    if kind == "file_change":
        return "apply_patch"
    if kind == "mcp_tool_call":
        return f"{item.get('server')}.{item.get('tool')}"
    if kind == "collab_tool_call":
        return str(item.get("tool", "collab"))
    return str(kind)


def call_data(item: dict[str, Any]) -> dict[str, Any]:
    kind = item.get("type")
    data: dict[str, Any] = {"id": item.get("id"), "type": kind}
    if kind == "command_execution":
        data["command"] = item.get("command")
    elif kind == "file_change":
        data["changes"] = item.get("changes")
    elif kind == "mcp_tool_call":
        data["arguments"] = item.get("arguments")
    elif kind == "web_search":
        data["query"] = item.get("query")
    elif kind == "collab_tool_call":
        data["prompt"] = item.get("prompt")
    return data


def result_data(item: dict[str, Any], duration_ms: int) -> dict[str, Any]:
    status = item.get("status")
    exit_code = item.get("exit_code")
    data: dict[str, Any] = {
        "call_id": item.get("id"),
        "status": status,
        "is_error": status in FAILED or exit_code not in (None, 0) or bool(item.get("error")),
        "duration_ms": max(0, duration_ms),
    }
    if item.get("type") == "command_execution":
        data |= {"exit_code": exit_code, "output": item.get("aggregated_output", "")}
    elif item.get("type") == "file_change":
        data["changes"] = item.get("changes")
    elif item.get("type") == "mcp_tool_call":
        data |= {"result": item.get("result"), "error": item.get("error")}
    elif item.get("type") == "web_search":
        data["query"] = item.get("query")
    return data
