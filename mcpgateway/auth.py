"""Bearer authentication for /mcp: `rnr_` runner tokens and `evk_` personal API keys.

The SDK's bearer middleware answers 401 (with `WWW-Authenticate`) whenever the verifier
returns None, so an unknown, revoked or malformed token never reaches a tool. What the
verifier returns is what a tool reads back through `get_access_token()`: a `Principal`
that carries the runner or the user it was resolved to.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Literal

from channels.db import database_sync_to_async
from django.contrib.auth.models import User
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ConfigDict, Field

from accounts import tokens
from accounts.services import api_key_authenticate
from core.kept import Kept, ttl
from core.transient import Unavailable, transient_cause
from runners import metrics, revocations, wakeup
from runners.lookups import by_ids
from runners.models import Runner
from runners.services import runner_authenticate

log = logging.getLogger(__name__)

RUNNER_SCOPE = "runner"
PERSONAL_SCOPE = "personal"


class Principal(AccessToken):
    """Who is calling: a runner (runner tools only) or a user holding an API key."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    # "unavailable": the token could not be checked for a passing reason of the server's own;
    # every tool answers such a caller a retryable error, and nothing else.
    kind: Literal["runner", "user", "unavailable"]
    # The rows the token resolved to, read once per HTTP request by the verifier.
    runner: Runner | None = Field(default=None, exclude=True)
    user: User | None = Field(default=None, exclude=True)

    cause: str = Field(default="", exclude=True)

    def _available(self) -> None:
        if self.kind == "unavailable":
            raise Unavailable(self.cause)

    def require_runner(self, tool: str) -> Runner:
        """Return the calling runner; anyone else gets a tool error, never data."""
        self._available()
        if self.kind != "runner" or self.runner is None:
            raise ToolError(
                f"{tool} is a runner tool: call it with a runner token (rnr_…), "
                "not a personal API key."
            )
        return self.runner

    def require_user(self, tool: str) -> User:
        """Return the calling user; a runner token is least-privilege and refused here."""
        self._available()
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


class RunnerPrincipals:
    """Runner principals verified lately, so a polling runner's every call does not look up
    its token again (`core.kept`'s rules, by the digest of the token).

    An entry is forgotten at once when its runner is revoked — on every replica, through
    the notification listener — and all are forgotten when notifications may have been
    missed; entries are kept only while that listener is listening (PostgreSQL), and for
    EVERDICT_AUTH_CACHE_S at most since they were last verified (an owner deactivated
    behind the application's back). The process verifies the entries that have aged a third
    of that again every third of it, in one query for all of them, so a runner that polls
    every 55 s is never looked up on its own once kept. The runner row is shared by the
    runner's concurrent calls, as its presence throttle.
    """

    def __init__(self) -> None:
        self.kept: Kept[Principal] = Kept(lambda: wakeup.listener.listening)
        self._lock = threading.Lock()
        self._following = False
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def follow_revocations(self) -> None:
        """Forget a runner's principal whenever it is revoked, anywhere (once per process),
        and keep the entries verified (once per event loop)."""
        with self._lock:
            following, self._following = self._following, True
        if not following:
            revocations.on_runner_revoked(self.forget)
        loop = asyncio.get_running_loop()
        if self._task is None or self._task.done() or self._loop is not loop:
            self._loop = loop
            self._task = loop.create_task(self._reverify_forever(), name="runner-principals")

    def forget(self, runner_id: int | None) -> None:
        """Forget this runner's principal (every principal when None)."""
        self.kept.forget(None if runner_id is None else lambda p: _runner_id(p) == runner_id)

    def reverify(self) -> int:
        """Verify again, in one query, the entries that have aged a third of the bound: keep
        those still valid from now, forget the others. Returns how many were checked."""
        began, generation = time.monotonic(), self.kept.generation()
        aged = {rid for p in self.kept.aged(ttl() / 3) if (rid := _runner_id(p)) is not None}
        if not aged:
            return 0
        valid = set[int]()
        for chunk in by_ids(Runner.objects.active().filter(owner__is_active=True), "pk", aged):
            valid.update(chunk.values_list("pk", flat=True))

        def still_valid(principal: Principal) -> bool | None:
            runner_id = _runner_id(principal)
            return None if runner_id not in aged else runner_id in valid

        self.kept.verified(still_valid, began, generation)
        return len(aged)

    async def _reverify_forever(self) -> None:
        reverify = database_sync_to_async(
            self.reverify, thread_sensitive=False, executor=wakeup.housekeeping_executor()
        )
        while True:
            await asyncio.sleep(max(0.1, ttl() / 3))
            if not self.kept:
                continue
            try:
                await reverify()
            except Exception:
                # The entries age out meanwhile; each is then looked up on its own.
                log.warning("could not verify kept runner tokens again", exc_info=True)


def _runner_id(principal: Principal) -> int | None:
    return principal.runner.pk if principal.runner is not None else None


runner_principals = RunnerPrincipals()


def _unavailable(token: str, cause: str) -> Principal:
    return Principal(
        token=token, client_id="unavailable", scopes=[], kind="unavailable", cause=cause
    )


class EverdictTokenVerifier:
    """The one `TokenVerifier` of the gateway.

    A token that cannot be checked because the database is unavailable is neither valid nor
    invalid: it is answered neither 401 (the runner would drop a good token) nor 500, but
    let through as an "unavailable" principal, to which every tool answers a retryable
    error and nothing else.
    """

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            return await self._verify(token)
        except Exception as exc:
            cause = transient_cause(exc)
            if cause is None:
                raise
            return _unavailable(token, cause)

    async def _verify(self, token: str) -> AccessToken | None:
        token = token.strip()
        if not token:
            return None
        resolve = database_sync_to_async(_resolve, thread_sensitive=False)
        if not token.startswith(tokens.RUNNER_TOKEN_PREFIX):
            return await resolve(token)
        wakeup.listener.ensure_started()
        runner_principals.follow_revocations()
        key = tokens.digest(token)
        kept = runner_principals.kept
        cached = kept.get(key)
        if cached is not None:
            return cached
        generation, began = kept.generation(), time.monotonic()
        metrics.RUNNER_TOKEN_LOOKUPS.inc()
        principal = await resolve(token)
        if principal is not None:
            kept.put(key, principal, generation, began)
        return principal


def current_principal() -> Principal:
    """The principal of the request being served (the bearer middleware guarantees one)."""
    access = get_access_token()
    if not isinstance(access, Principal):
        # Unreachable behind the bearer middleware; refuse rather than guess.
        raise ToolError("Authentication required.")
    return access
