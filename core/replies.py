"""Reply shapes: one pydantic model per reply, shared by the REST API, the pages and MCP.

A DRF view answers `Response(reply.data())` and declares `responses=<the model>` (drf-spectacular
reads pydantic models through its pydantic extension); an MCP tool returns the model itself
(the SDK publishes its output schema and answers with `structuredContent`). Both transports
serialize the same model the same way, so their replies cannot drift apart.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, PlainSerializer, WithJsonSchema

# A moment as `datetime.isoformat()` writes it (`…+00:00`), described as an RFC 3339 date-time.
Timestamp = Annotated[
    datetime,
    PlainSerializer(lambda moment: moment.isoformat(), return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]


class Reply(BaseModel):
    """A reply as it travels: `data()` is the JSON both transports send."""

    model_config = ConfigDict(populate_by_name=True)

    def data(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def data(replies: list[Any]) -> list[dict[str, Any]]:
    """A list reply as it travels."""
    return [reply.data() for reply in replies]
