"""Reply shapes of identity: personal API keys as listed and as issued."""

from __future__ import annotations

from pydantic import Field, RootModel

from accounts.models import ApiKey
from core.replies import Reply, Timestamp


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
