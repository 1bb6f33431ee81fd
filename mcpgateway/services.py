"""The one service the gateway owns: a runner's `hello` (who am I, protocol check, presence)."""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings

from runnercli.protocol import PROTOCOL_VERSION, Hello
from runners.models import Runner
from runners.presence import runner_touch
from runners.queue import runner_capabilities_update


def protocol_outdated(protocol: int) -> bool:
    return protocol < settings.EVERDICT_MIN_RUNNER_PROTOCOL


def runner_hello(
    *, runner: Runner, protocol: int, capabilities: Sequence[str], status: str = ""
) -> Hello:
    """Mark the runner present, keep what it reports, and tell it whether it must update.

    An empty capability list means "not reported": it never wipes the stored set.
    """
    if capabilities:
        runner_capabilities_update(runner=runner, capabilities=capabilities)
    runner_touch(runner=runner, status=status)
    return Hello(
        runner_id=runner.pk,
        label=runner.label,
        owner=runner.owner.get_username(),
        server_protocol=PROTOCOL_VERSION,
        update_required=protocol_outdated(protocol),
    )
