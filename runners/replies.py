"""Reply shapes for runners and API keys, shared by the REST API, pages and MCP tools."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from everdict.models import ApiKey
from runners.models import Runner
from runners.presence import runner_statuses


def runner_items(runners: Iterable[Runner]) -> list[dict[str, Any]]:
    """`[{id, label, os, capabilities, online, last_seen_at, status, revoked}]`."""
    runners = list(runners)
    statuses = runner_statuses([r.pk for r in runners])
    return [
        {
            "id": r.pk,
            "label": r.label,
            "os": r.os,
            "capabilities": list(r.capabilities or []),
            "online": r.is_online,
            "last_seen_at": r.last_seen_at.isoformat() if r.last_seen_at else None,
            "status": "" if r.is_revoked else statuses.get(r.pk, ""),
            "revoked": r.is_revoked,
        }
        for r in runners
    ]


def paired_runner_reply(runner: Runner, token: str) -> dict[str, Any]:
    """The pairing reply: the only place the token is ever seen."""
    return {
        "id": runner.pk,
        "label": runner.label,
        "os": runner.os,
        "capabilities": list(runner.capabilities or []),
        "token": token,
    }


def api_key_items(keys: Iterable[ApiKey]) -> list[dict[str, Any]]:
    return [
        {
            "id": k.pk,
            "name": k.name,
            "prefix": k.prefix,
            "created_at": k.created_at.isoformat(),
            "last_used_at": k.last_used_at.isoformat() if k.last_used_at else None,
        }
        for k in keys
    ]
