"""What a tool call's result holds: its text, its structured failure, its JSON."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from runnercli.client.errors import ToolCallError
from runnercli.protocol import ToolFailure


def text_of(result: Any) -> str:
    texts = [getattr(block, "text", "") for block in result.content]
    return "\n".join(text for text in texts if text)


def failure_of(result: Any) -> ToolFailure | None:
    """The structured content of a tool error, when the server gave one."""
    content = result.structured_content
    if content is None:
        return None
    try:
        return ToolFailure.model_validate(content)
    except ValidationError:
        return None


def json_of(result: Any) -> Any:
    try:
        return json.loads(text_of(result))
    except ValueError as exc:
        raise ToolCallError("the tool answered without a structured result") from exc
