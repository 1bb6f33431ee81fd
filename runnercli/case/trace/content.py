"""What parsers keep of message content: text as text, and never an image's base64 bytes."""

from __future__ import annotations

import json
from typing import Any

from runnercli.case.trace.events import Draft


def media_note(block: Any) -> Any:
    """`block` with any base64 payload replaced by its media type and size."""
    if not isinstance(block, dict):
        return block
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "base64":
        data = source.get("data")
        note = {"media_type": source.get("media_type"), "base64_chars": len(str(data or ""))}
        return {**block, "source": note}
    return block


def block_text(block: Any) -> str:
    """One content block as text: its text, a note for an image, else its JSON."""
    if isinstance(block, str):
        return block
    if isinstance(block, dict) and block.get("type") == "text":
        return str(block.get("text", ""))
    if isinstance(block, dict) and block.get("type") == "image":
        note = media_note(block).get("source", {})
        return f"[image {note.get('media_type')}, {note.get('base64_chars', 0)} base64 chars]"
    return json.dumps(media_note(block), ensure_ascii=False)


def content_text(content: Any) -> str:
    """A tool result's content (a string, or a list of blocks) as one text."""
    if content is None:
        return ""
    if isinstance(content, list):
        return "\n".join(block_text(block) for block in content)
    return block_text(content)


def unknown_type(obj: dict[str, Any], ts: int) -> Draft:
    """A line of a type the parser does not know, kept whole (bounded) as `raw`."""
    return Draft("raw", str(obj.get("type", "")), {"event": obj}, ts)
