"""A verified API key is kept briefly by the server, never past a change to it or its user.

On PostgreSQL each server process keeps the keys it verified for EVERDICT_AUTH_CACHE_S, and
forgets a user's keys at once when the key is revoked, or the user saved or deleted,
anywhere (the change is announced with NOTIFY to every process). On SQLite nothing is kept:
every request looks its key up.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection

from accounts.kept import KeptKey, kept_keys
from accounts.services import api_key_create, api_key_revoke
from tests.live import LiveServer, metric
from tests.mcpgateway.conftest import live_server_fixtures

CACHE_S = 3

keptkeys_process, server = live_server_fixtures("keptkeys", "server", EVERDICT_AUTH_CACHE_S=CACHE_S)


def api_status(server: LiveServer, key: str) -> int:
    """The HTTP status of `GET /api/runners` with this key (401: refused)."""
    request = urllib.request.Request(
        f"{server.url}/api/runners", headers={"Authorization": f"Bearer {key}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def refused_within(server: LiveServer, key: str, seconds: float) -> bool:
    """Whether the key is refused (401) within `seconds` (an announcement's delivery)."""
    until = time.monotonic() + seconds
    status = api_status(server, key)
    while status == 200 and time.monotonic() < until:
        time.sleep(0.02)
        status = api_status(server, key)
    return status == 401


def kept_by_the_server(server: LiveServer, key: str) -> str:
    """The key, once the server has verified it and (on PostgreSQL) keeps it."""
    assert api_status(server, key) == 200
    # The listener starts with the server's first request; a key verified before it
    # listens is not kept. A moment later it is.
    time.sleep(0.3)
    assert api_status(server, key) == 200
    return key


@pytest.mark.e2e
def test_a_kept_key_is_not_looked_up_again_but_each_request_still_is_on_sqlite(
    server: LiveServer, alice: Any
) -> None:
    key = kept_by_the_server(server, api_key_create(user=alice).key)
    before = metric(server.url, "everdict_api_key_lookups_total")
    for _ in range(10):
        assert api_status(server, key) == 200
    looked_up = metric(server.url, "everdict_api_key_lookups_total") - before
    assert looked_up == (0 if connection.vendor == "postgresql" else 10)


@pytest.mark.e2e
def test_a_revoked_key_is_refused_at_once_though_it_was_kept(
    server: LiveServer, alice: Any
) -> None:
    issued = api_key_create(user=alice)
    other = kept_by_the_server(server, api_key_create(user=alice).key)
    kept_by_the_server(server, issued.key)

    assert api_key_revoke(user=alice, key_id=issued.api_key.pk)  # this process, not the server's

    assert refused_within(server, issued.key, 1.0)
    assert api_status(server, other) == 200  # the user's other key: verified again, valid


@pytest.mark.e2e
def test_a_user_deactivated_or_deleted_by_an_admin_loses_access_at_once(
    server: LiveServer, alice: Any, bob: Any
) -> None:
    alices = kept_by_the_server(server, api_key_create(user=alice).key)
    bobs = kept_by_the_server(server, api_key_create(user=bob).key)

    alice.is_active = False
    alice.save()  # as the admin's user page does
    assert refused_within(server, alices, 1.0)

    bob.delete()
    assert refused_within(server, bobs, 1.0)


@pytest.mark.e2e
def test_a_user_deactivated_behind_the_servers_back_loses_access_within_the_bound(
    server: LiveServer, alice: Any
) -> None:
    key = kept_by_the_server(server, api_key_create(user=alice).key)
    type(alice).objects.filter(pk=alice.pk).update(is_active=False)  # no announcement

    if connection.vendor == "postgresql":
        # Kept: the next requests within the bound are answered without a lookup...
        assert api_status(server, key) == 200
        time.sleep(CACHE_S + 0.5)
    # ...and once it has passed (at once on SQLite, which keeps nothing), refused.
    assert api_status(server, key) == 401


@pytest.fixture
def following() -> Iterator[None]:
    """This process's kept keys, as if its listener were listening."""
    kept_keys.follow(lambda: True)
    kept_keys.forget_user(None)
    yield
    kept_keys.follow(lambda: False)
    kept_keys.forget_user(None)


def test_a_key_verified_before_an_announcement_it_crossed_is_not_kept(following: None) -> None:
    verified = KeptKey(row=(), user_id=7, last_used_at=None)
    generation = kept_keys.generation()
    kept_keys.forget_user(7)  # announced while the lookup ran: the row read may be stale
    kept_keys.put("digest", verified, generation, time.monotonic())
    assert kept_keys.get("digest") is None

    kept_keys.put("digest", verified, kept_keys.generation(), time.monotonic())
    assert kept_keys.get("digest") is verified
    kept_keys.forget_user(8)  # another user's change
    assert kept_keys.get("digest") is verified
    kept_keys.forget_user(None)  # announcements may have been missed
    assert kept_keys.get("digest") is None


def test_nothing_is_kept_while_no_announcement_would_arrive() -> None:
    verified = KeptKey(row=(), user_id=7, last_used_at=None)
    kept_keys.put("digest", verified, kept_keys.generation(), time.monotonic())
    assert kept_keys.get("digest") is None
