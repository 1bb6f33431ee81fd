"""What a running case is doing now, in one short line for the run page: read from its trace
by the server (`short_argument`, `elapsed`), and by anyone following a trace (`CurrentStep`).

"Bash `npm test` · 40 s" while a tool call is open (its name, a short argument, how long it
has run), else "thinking" or "writing" from the last event.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from runnercli.protocol.trace import TraceEvent, now_ms

# The arguments that say best what a call does, in the order they are looked for.
ARGUMENT_KEYS = ("command", "file_path", "path", "pattern", "url", "query", "description")
ARGUMENT_CHARS = 40
# Shells an agent wraps its commands in (Codex runs `bash -lc 'npm test'`): the command shows.
SHELL_PREFIXES = ("bash -lc ", "bash -c ", "/bin/bash -lc ", "/bin/bash -c ", "sh -c ", "zsh -lc ")


def short_argument(data: dict[str, Any]) -> str:
    """The call's most telling argument, on one line and at most ARGUMENT_CHARS long."""
    sources = [data.get("input"), data.get("arguments"), data]
    for source in (s for s in sources if isinstance(s, dict)):
        for key in ARGUMENT_KEYS:
            value = source.get(key)
            if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
                value = " ".join(value)
            if isinstance(value, str) and value.strip():
                return _one_line(value)
    changes = data.get("changes")
    if isinstance(changes, list) and changes and isinstance(changes[0], dict):
        return _one_line(str(changes[0].get("path", "")))
    return ""


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    for prefix in SHELL_PREFIXES:
        if text.startswith(prefix):
            text = text.removeprefix(prefix)
            if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"":
                text = text[1:-1]
            break
    text = text.replace("`", "'")
    return text if len(text) <= ARGUMENT_CHARS else text[: ARGUMENT_CHARS - 1] + "…"


def elapsed(ms: int) -> str:
    """A duration as the run page says it: "40 s", "3 min 5 s", "1 h 2 min"."""
    seconds = max(0, ms) // 1000
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


class CurrentStep:
    """Follows a case's events and says what it is doing."""

    def __init__(self) -> None:
        # Open tool calls by their id (or seq when they have none), oldest first.
        self._open: dict[str, TraceEvent] = {}
        self._last: TraceEvent | None = None

    def observe(self, events: Iterable[TraceEvent]) -> None:
        for event in events:
            if event.kind == "tool_call":
                self._open[str(event.data.get("id") or f"#{event.seq}")] = event
            elif event.kind == "tool_result":
                self._close(event)
            if event.kind != "raw":
                self._last = event

    def summary(self, now: int | None = None) -> str:
        """One line: the newest open call and how long it has run, else the latest activity."""
        at = now_ms() if now is None else now
        if self._open:
            call = next(reversed(self._open.values()))
            argument = short_argument(call.data)
            label = f"{call.name} `{argument}`" if argument else call.name
            return f"{label} · {elapsed(at - call.ts)}"
        return self._activity()

    def _activity(self) -> str:
        last = self._last
        if last is None:
            return "starting"
        if last.kind == "message" and last.name == "assistant":
            return "writing"
        if last.kind == "usage" and last.name == "result":
            return "done"
        if last.kind == "error":
            return f"error: {last.name}"
        return "thinking"

    def _close(self, result: TraceEvent) -> None:
        call_id = result.data.get("call_id")
        if call_id is not None and str(call_id) in self._open:
            del self._open[str(call_id)]
            return
        # No id to pair by (a harness's own trace file): the newest open call of that name.
        for key, call in reversed(list(self._open.items())):
            if call.name == result.name:
                del self._open[key]
                return
