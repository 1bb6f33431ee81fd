"""/metrics: the queue's metrics, served to loopback callers, everyone, or a bearer of the
configured token (`EVERDICT_METRICS`)."""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import REGISTRY

from accounts.tokens import digest


def _allowed(request: HttpRequest) -> bool:
    mode = settings.EVERDICT_METRICS
    if mode == "open":
        return True
    if mode == "loopback":
        if "X-Forwarded-For" in request.headers or "Forwarded" in request.headers:
            # Relayed by a proxy on this machine: the caller is whoever reached the proxy.
            return False
        try:
            return ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
        except ValueError:
            return False
    header = request.headers.get("Authorization", "")
    return header.startswith("Bearer ") and hmac.compare_digest(
        digest(header[7:].strip()), digest(mode)
    )


def metrics_view(request: HttpRequest) -> HttpResponse:
    """Serve /metrics to loopback callers, everyone, or a bearer of the configured token."""
    if not _allowed(request):
        return HttpResponse("metrics are not available to this caller\n", status=403)
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
