"""Personal tools: what a member (or their agent) calls with an `evk_` API key.

The same services and reply models as the account page and the REST API, so an MCP reply
equals the REST one item for item.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, StringConstraints

from accounts.models import ApiKey
from accounts.replies import ApiKeyItem
from core.errors import QuotaExceeded
from mcpgateway.auth import current_principal
from mcpgateway.calls import in_thread
from mcpgateway.replies import ApiKeyList, Revoked, RunnerList
from runnercli.protocol import MAX_CAPABILITIES, Capability
from runners.models import PairingMethod
from runners.pairing import device_pairing_decide
from runners.replies import DevicePairingItem, PairedRunner, runner_items
from runners.roster import runners_of
from runners.services import runner_pair, runner_revoke
from runners.throttles import device_code_wait

if TYPE_CHECKING:
    from django.contrib.auth.models import User

Label = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]


def _paired(owner: User, label: str, os: str, capabilities: list[str]) -> PairedRunner:
    paired = runner_pair(
        owner=owner, label=label, os=os, capabilities=capabilities, via=PairingMethod.MCP
    )
    return PairedRunner.of(paired.runner, paired.token)


def _runners(owner: User) -> RunnerList:
    return RunnerList(runners=runner_items(runners_of(owner)))


def _revoked(owner: User, runner_id: int) -> Revoked:
    runner_revoke(owner=owner, runner_id=runner_id)
    return Revoked(revoked=True)


def _api_keys(user: User) -> ApiKeyList:
    return ApiKeyList(keys=[ApiKeyItem.of(key) for key in ApiKey.objects.owned_by(user).active()])


def _approved(user: User, user_code: str) -> DevicePairingItem:
    if (wait := device_code_wait(user)) is not None:
        raise QuotaExceeded(f"Too many codes tried: wait {int(wait) + 1} s, then try again.")
    pairing = device_pairing_decide(user=user, user_code=user_code, approve=True)
    return DevicePairingItem.of(pairing)


async def pair_runner(
    label: Label,
    os: Annotated[str, Field(max_length=100)] = "",
    capabilities: Annotated[Sequence[Capability], Field(max_length=MAX_CAPABILITIES)] = (),
) -> PairedRunner:
    """Pair a new runner for yourself. The `token` in the reply is shown this once."""
    user = current_principal().require_user("pair_runner")
    return await in_thread(_paired, owner=user, label=label, os=os, capabilities=list(capabilities))


async def list_runners() -> RunnerList:
    """List your runners: online, last seen, live status; revoked ones stay, marked."""
    user = current_principal().require_user("list_runners")
    return await in_thread(_runners, owner=user)


async def revoke_runner(runner_id: int) -> Revoked:
    """Revoke one of your runners: its token stops working at once."""
    user = current_principal().require_user("revoke_runner")
    return await in_thread(_revoked, owner=user, runner_id=runner_id)


async def list_api_keys() -> ApiKeyList:
    """List your active personal API keys (never the keys themselves)."""
    user = current_principal().require_user("list_api_keys")
    return await in_thread(_api_keys, user=user)


async def approve_device_pairing(
    user_code: Annotated[str, Field(max_length=20, description="The code the machine shows.")],
) -> DevicePairingItem:
    """Approve the pairing request of a machine showing this code (`python -m runnercli pair`
    without a token): it becomes your runner when it collects its token."""
    user = current_principal().require_user("approve_device_pairing")
    return await in_thread(_approved, user=user, user_code=user_code)


PERSONAL_TOOLS: list[Callable[..., Any]] = [
    pair_runner,
    list_runners,
    revoke_runner,
    list_api_keys,
    approve_device_pairing,
]
