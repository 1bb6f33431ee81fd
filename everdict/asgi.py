"""ASGI entry point: Django pages and API, /mcp for the MCP gateway, run pages' WebSocket."""

from __future__ import annotations

import gc
import os

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "everdict.settings")
# Django first: the apps must be loaded before anything imports models.
# Static files (admin, API docs, page assets) are served by the app itself, so a bare
# `daphne everdict.asgi:application` needs no separate web server.
django_asgi_app = ASGIStaticFilesHandler(get_asgi_application())

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from mcpgateway.asgi import route_mcp  # noqa: E402
from scorecards.urls import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        # /mcp (and /mcp/) → the MCP gateway; every other path → Django.
        "http": route_mcp(django_asgi_app),
        # The live run pages: session-authenticated, same-origin sockets only.
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)

# Everything loaded so far (Django, the apps, the MCP server's modules) lives as long as the
# process: out of the collector's sight, a full collection no longer walks it each time.
gc.freeze()
