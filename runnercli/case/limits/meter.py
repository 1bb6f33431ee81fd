"""What the agent has used so far, as its stream tells it.

Claude's `stream-json`: tokens per assistant message (`message.usage`, input plus output,
each message id counted once — a message comes as several lines, one per content block), a
turn per assistant message, the cost only in the final `result` (`total_cost_usd`). Codex's
JSON lines: tokens at each turn's end (`turn.completed`), a turn per completed tool call or
agent message, no cost. A trace file's `usage` events count as Claude's messages do: a turn
and its tokens each (an event with the `id` of one counted already adds nothing), and its cost
as the event says it — `total_cost_usd` the cost so far, `cost_usd` that call's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runnercli.protocol.verifying import LimitsSpec

CODEX_TURN_ITEMS = frozenset(
    {"agent_message", "command_execution", "mcp_tool_call", "file_change", "web_search"}
)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _cost(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


@dataclass
class Meter:
    output: str
    limits: LimitsSpec
    tokens: int = 0
    turns: int = 0
    cost_usd: float | None = None
    seen: set[str] = field(default_factory=set)

    def event(self, obj: Any) -> str | None:
        """Count one event; return the limit it passes (`max_tokens`, …) or None."""
        if not isinstance(obj, dict):
            return None
        kind = obj.get("type")
        if self.output == "codex-jsonl":
            if kind == "turn.completed" and isinstance(obj.get("usage"), dict):
                usage = obj["usage"]
                self.tokens += _count(usage.get("input_tokens")) + _count(
                    usage.get("output_tokens")
                )
            item = obj.get("item")
            if kind == "item.completed" and isinstance(item, dict):
                self.turns += item.get("type") in CODEX_TURN_ITEMS
        elif kind == "assistant" and isinstance(obj.get("message"), dict):
            message = obj["message"]
            key = str(message.get("id") or id(message))
            if key not in self.seen:
                self.seen.add(key)
                self.turns += 1
                usage = message.get("usage")
                if isinstance(usage, dict):
                    self.tokens += _count(usage.get("input_tokens")) + _count(
                        usage.get("output_tokens")
                    )
        elif kind == "result":
            cost = obj.get("total_cost_usd")
            if isinstance(cost, int | float) and not isinstance(cost, bool):
                self.cost_usd = float(cost)
        return self.passed()

    def usage(self, data: Any) -> str | None:
        """Count one `usage` event of the trace file; return the limit it passes or None."""
        if not isinstance(data, dict):
            return None
        key = data.get("id")
        if isinstance(key, str | int) and not isinstance(key, bool):
            if f"usage:{key}" in self.seen:
                return None
            self.seen.add(f"usage:{key}")
        self.turns += 1
        self.tokens += _count(data.get("input_tokens")) + _count(data.get("output_tokens"))
        total, cost = _cost(data.get("total_cost_usd")), _cost(data.get("cost_usd"))
        if total is not None:
            self.cost_usd = total
        elif cost is not None:
            self.cost_usd = (self.cost_usd or 0.0) + cost
        return self.passed()

    def passed(self) -> str | None:
        limits = self.limits
        if limits.max_tokens is not None and self.tokens > limits.max_tokens:
            return "max_tokens"
        if limits.max_turns is not None and self.turns > limits.max_turns:
            return "max_turns"
        cost, most = self.cost_usd, limits.max_cost_usd
        if most is not None and cost is not None and cost > most:
            return "max_cost_usd"
        return None

    def used(self) -> dict[str, float]:
        used: dict[str, float] = {"tokens": self.tokens, "turns": self.turns}
        if self.cost_usd is not None:
            used["cost_usd"] = self.cost_usd
        return used

    def said(self, limit: str) -> str:
        """ "stopped at 31,000 of 30,000 tokens after 14 turns"."""
        limits = self.limits
        if limit == "max_tokens":
            most = limits.max_tokens
            return f"stopped at {self.tokens:,} of {most:,} tokens after {self.turns} turns"
        if limit == "max_turns":
            return f"stopped at {self.turns} of {limits.max_turns} turns ({self.tokens:,} tokens)"
        return (
            f"stopped at ${self.cost_usd or 0:.2f} of ${limits.max_cost_usd or 0:.2f} "
            f"after {self.turns} turns"
        )
