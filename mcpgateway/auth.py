"""Bearer authentication for /mcp: `rnr_` runner tokens and `evk_` personal API keys.

The SDK's bearer middleware answers 401 (with `WWW-Authenticate`) whenever the verifier
returns None, so an unknown, revoked or malformed token never reaches a tool. What the
verifier returns is what a tool reads back through `get_access_token()`: a `Principal`
that carries the runner or the user it was resolved to.
"""

from __future__ import annotations

from typing import Any, Literal

from channels.db import database_sync_to_async
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ConfigDict, Field

from everdict import tokens
from everdict.services import api_key_authenticate
from runners.models import Runner
from runners.services import runner_authenticate

RUNNER_SCOPE = "runner"
PERSONAL_SCOPE = "personal"


class Principal(AccessToken):
    """Who is calling: a runner (runner tools only) or a user holding an API key."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    kind: Literal["runner", "user"]
    # The rows the token resolved to, read once per HTTP request by the verifier.
    runner: Runner | None = Field(default=None, exclude=True)
    user: Any = Field(default=None, exclude=True)

    def require_runner(self, tool: str) -> Runner:
        """Return the calling runner; anyone else gets a tool error, never data."""
        if self.kind != "runner" or self.runner is None:
            raise ToolError(
                f"{tool} is a runner tool: call it with a runner token (rnr_…), "
                "not a personal API key."
            )
        return self.runner

    def require_user(self, tool: str) -> Any:
        """Return the calling user; a runner token is least-privilege and refused here."""
        if self.kind != "user" or self.user is None:
            raise ToolError(
                f"{tool} is a personal tool: call it with a personal API key (evk_…); "
                "a runner token may call the runner tools only."
            )
        return self.user


def _resolve(token: str) -> Principal | None:
    if token.startswith(tokens.RUNNER_TOKEN_PREFIX):
        runner = runner_authenticate(token)
        if runner is None:
            return None
        return Principal(
            token=token,
            client_id=f"runner:{runner.pk}",
            scopes=[RUNNER_SCOPE],
            subject=str(runner.owner_id),
            kind="runner",
            runner=runner,
            user=runner.owner,
        )
    if token.startswith(tokens.API_KEY_PREFIX):
        api_key = api_key_authenticate(token)
        if api_key is None:
            return None
        return Principal(
            token=token,
            client_id=f"user:{api_key.user_id}",
            scopes=[PERSONAL_SCOPE],
            subject=str(api_key.user_id),
            kind="user",
            user=api_key.user,
        )
    return None


class EverdictTokenVerifier:
    """The one `TokenVerifier` of the gateway."""

    async def verify_token(self, token: str) -> AccessToken | None:
        token = token.strip()
        if not token:
            return None
        return await database_sync_to_async(_resolve)(token)


def current_principal() -> Principal:
    """The principal of the request being served (the bearer middleware guarantees one)."""
    access = get_access_token()
    if not isinstance(access, Principal):
        # Unreachable behind the bearer middleware; refuse rather than guess.
        raise ToolError("Authentication required.")
    return access
