"""Reply shapes of the runners app, shared by the REST API, the account page and MCP."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import Field, RootModel

from core.replies import Reply, Timestamp
from runners.models import DevicePairing, Runner
from runners.presence import runner_statuses


class RunnerItem(Reply):
    """A runner on its owner's roster: presence, live status line, revoked or not."""

    id: int
    label: str
    os: str
    capabilities: list[str]
    online: bool
    last_seen_at: Timestamp | None
    status: str
    revoked: bool


class RunnerItems(RootModel[list[RunnerItem]]):
    """The REST list of runners (the schema's name for `[RunnerItem]`)."""


def runner_items(runners: Iterable[Runner]) -> list[RunnerItem]:
    """The roster: each runner with its status line (read in one cache round trip)."""
    runners = list(runners)
    statuses = runner_statuses([r.pk for r in runners])
    return [
        RunnerItem(
            id=r.pk,
            label=r.label,
            os=r.os,
            capabilities=list(r.capabilities or []),
            online=r.is_online,
            last_seen_at=r.last_seen_at,
            status="" if r.is_revoked else statuses.get(r.pk, ""),
            revoked=r.is_revoked,
        )
        for r in runners
    ]


class PairedRunner(Reply):
    """The pairing reply: the only place the token is ever seen."""

    id: int
    label: str
    os: str
    capabilities: list[str]
    token: str = Field(description="The runner token, shown this once: only its hash is kept.")

    @classmethod
    def of(cls, runner: Runner, token: str) -> PairedRunner:
        return cls(
            id=runner.pk,
            label=runner.label,
            os=runner.os,
            capabilities=list(runner.capabilities or []),
            token=token,
        )


class DevicePairingItem(Reply):
    """A machine's pairing request as the member deciding it sees it."""

    user_code: str
    label: str
    os: str
    capabilities: list[str]
    requested_from: str
    requested_at: Timestamp
    expires_at: Timestamp
    status: str = Field(description="pending, approved, denied or consumed (paired).")

    @classmethod
    def of(cls, pairing: DevicePairing) -> DevicePairingItem:
        return cls(
            user_code=pairing.user_code,
            label=pairing.label,
            os=pairing.os,
            capabilities=list(pairing.capabilities or []),
            requested_from=pairing.requested_from,
            requested_at=pairing.created_at,
            expires_at=pairing.expires_at,
            status=pairing.status,
        )
