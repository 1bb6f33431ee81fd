"""Reply shapes: one pydantic model per reply, shared by the REST API, the pages and MCP.

A DRF view answers `Response(reply.data())` and declares `responses=<the model>` (drf-spectacular
reads pydantic models through its pydantic extension); an MCP tool returns the model itself
(the SDK publishes its output schema and answers with `structuredContent`). Both transports
serialize the same model the same way, so their replies cannot drift apart.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer, RootModel, WithJsonSchema

from accounts.models import ApiKey

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


class ApiKeyItem(Reply):
    """A personal API key as listed: never the key itself."""

    id: int
    name: str
    prefix: str
    created_at: Timestamp
    last_used_at: Timestamp | None

    @classmethod
    def of(cls, key: ApiKey) -> ApiKeyItem:
        return cls(
            id=key.pk,
            name=key.name,
            prefix=key.prefix,
            created_at=key.created_at,
            last_used_at=key.last_used_at,
        )


class IssuedKey(Reply):
    """A personal API key just created: the only reply that carries the key."""

    id: int
    name: str
    prefix: str
    key: str = Field(description="Shown once: only its hash is kept.")

    @classmethod
    def of(cls, api_key: ApiKey, key: str) -> IssuedKey:
        return cls(id=api_key.pk, name=api_key.name, prefix=api_key.prefix, key=key)


class ApiKeyItems(RootModel[list[ApiKeyItem]]):
    """The REST list of API keys (the schema's name for `[ApiKeyItem]`)."""
