"""The /mcp host check follows Django's ALLOWED_HOSTS, wildcards included."""

from __future__ import annotations

from typing import Any

import pytest

from mcpgateway.asgi import host_allowed
from mcpgateway.server import transport_security


def scope_for(host: str) -> dict[str, Any]:
    return {"type": "http", "path": "/mcp", "headers": [(b"host", host.encode())]}


def test_the_transport_allows_each_host_on_any_port() -> None:
    security = transport_security(["127.0.0.1", "everdict.example"])
    assert security.enable_dns_rebinding_protection
    assert {"127.0.0.1", "127.0.0.1:*", "everdict.example:*"} <= set(security.allowed_hosts)
    assert "https://everdict.example:*" in security.allowed_origins


@pytest.mark.parametrize("hosts", [["*"], [".example.com"]])
def test_django_wildcards_leave_the_check_to_the_gateway(hosts: list[str]) -> None:
    assert not transport_security(hosts).enable_dns_rebinding_protection


@pytest.mark.parametrize(
    ("allowed", "host", "ok"),
    [
        (["127.0.0.1"], "127.0.0.1:8000", True),
        (["127.0.0.1"], "evil.example", False),
        ([".example.com"], "runners.example.com:443", True),
        ([".example.com"], "example.com", True),
        ([".example.com"], "example.org", False),
        (["*"], "anything.test:1", True),
        (["127.0.0.1"], "", False),
    ],
)
def test_the_gateway_applies_djangos_host_rules(
    settings: Any, allowed: list[str], host: str, ok: bool
) -> None:
    settings.ALLOWED_HOSTS = allowed
    assert host_allowed(scope_for(host)) is ok


def test_an_empty_allowed_hosts_under_debug_means_localhost_as_in_django(settings: Any) -> None:
    settings.ALLOWED_HOSTS = []
    settings.DEBUG = True
    assert host_allowed(scope_for("localhost:8000"))
    assert not host_allowed(scope_for("evil.example"))
