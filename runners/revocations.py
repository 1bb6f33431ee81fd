"""Runner revocations told to every process, so that each forgets the runner's verified
token at once.

`announce_revoked()` runs inside the revoking transaction: on PostgreSQL it issues
`pg_notify`, delivered only if and when the transaction commits, to every process (every
replica) listening — `runners.wakeup`'s listener relays it here; the revoking process
also tells its own hooks right after commit.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection, transaction

CHANNEL = "everdict_runners_revoked"

_hooks: list[Callable[[int | None], None]] = []


def on_runner_revoked(hook: Callable[[int | None], None]) -> None:
    """Call `hook(runner_id)` in this process whenever a runner is revoked (anywhere), and
    `hook(None)` whenever revocations may have been missed (the listener reconnecting)."""
    _hooks.append(hook)


def relay(runner_id: int | None) -> None:
    """Tell this process's hooks that this runner was revoked (None: revocations may have
    been missed)."""
    for hook in _hooks:
        hook(runner_id)


def announce_revoked(runner_id: int) -> None:
    """Announce, as part of the current transaction, that this runner was revoked."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, str(runner_id)])
    transaction.on_commit(lambda: relay(runner_id))
