"""The personal MCP tools with an API key (`submit`, `push`): `call` returns a tool's structured
reply."""

from __future__ import annotations

import contextlib
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from runnercli.config import mcp_url

API_KEY_ENV = "EVERDICT_API_KEY"


class SubmitError(Exception):
    """A usage, authentication or server error: exit 2."""


class PersonalApi:
    """An MCP session with a personal API key; `call` returns a tool's structured reply."""

    def __init__(self, server: str, api_key: str) -> None:
        self.server = server
        self.api_key = api_key
        self._status: int | None = None
        self._stack = contextlib.AsyncExitStack()
        self._client: Client | None = None

    async def _on_response(self, response: httpx2.Response) -> None:
        if response.status_code >= 400:
            self._status = response.status_code

    async def __aenter__(self) -> PersonalApi:
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {self.api_key}"},
            timeout=httpx2.Timeout(30, read=60),
            event_hooks={"response": [self._on_response]},
        )
        transport = streamable_http_client(mcp_url(self.server), http_client=http)
        try:
            await self._stack.enter_async_context(http)
            self._client = await self._stack.enter_async_context(Client(transport))
        except Exception as exc:
            await self._stack.aclose()
            raise self._error(exc) from None
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            await self._stack.aclose()

    def _error(self, exc: BaseException) -> SubmitError:
        if self._status == 401:
            return SubmitError("the server refused this API key (HTTP 401): check --api-key")
        if self._status is not None:
            return SubmitError(f"the server answered HTTP {self._status}")
        return SubmitError(f"cannot reach {self.server}: {type(exc).__name__}: {exc}")

    async def call(self, tool: str, **args: Any) -> dict[str, Any]:
        assert self._client is not None
        try:
            result = await self._client.call_tool(tool, {k: v for k, v in args.items()})
        except Exception as exc:
            raise self._error(exc) from None
        if result.is_error:
            text = " ".join(getattr(block, "text", "") for block in result.content)
            raise SubmitError(f"{tool}: {text}")
        return dict(result.structured_content or {})
