"""DRF throttles of device pairing, kept in the cache (REDIS_URL: shared by every replica),
at the rates of EVERDICT_THROTTLE_RATES, read when a request is throttled (so tests and
operators change them without a code change)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle

if TYPE_CHECKING:
    from django.contrib.auth.models import User


class _SettingsRate(SimpleRateThrottle):
    def get_rate(self) -> str:
        return str(settings.EVERDICT_THROTTLE_RATES[str(self.scope)])


class DevicePairingThrottle(_SettingsRate):
    """Asking for pairing codes, per address (anonymous)."""

    scope = "device_pairing"

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class DeviceTokenThrottle(DevicePairingThrottle):
    """Polling for a token, per address (anonymous)."""

    scope = "device_token"


class DeviceCodeThrottle(_SettingsRate):
    """Typing user codes, per member, on the page, the API and MCP alike: guessing a code
    someone else's machine shows is slowed to a crawl."""

    scope = "device_code"

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}


def device_code_wait(user: User) -> float | None:
    """Count one code lookup by `user` outside DRF (page, MCP): None when allowed, else the
    seconds to wait."""
    throttle = DeviceCodeThrottle()
    # The throttle reads only `request.user` (get_cache_key above): the member stands in.
    if throttle.allow_request(SimpleNamespace(user=user), None):  # type: ignore[arg-type]
        return None
    return throttle.wait() or 1.0
