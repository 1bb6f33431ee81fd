"""ASGI entry point: Django pages and API, /mcp for the MCP gateway, run pages' WebSocket."""

from __future__ import annotations

import gc
import os
from typing import Any

from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "everdict.settings")
# Collections of the middle generation before a full one (Python's default: 10).
FULL_COLLECTION_AFTER = 1_000
# Django first: the apps must be loaded before anything imports models.
# Static files (admin, API docs, page assets) are served by the app itself, so a bare
# `daphne everdict.asgi:application` needs no separate web server.
from core.request_bodies import leave_bodies_unparsed  # noqa: E402
from core.request_threads import RequestThreads  # noqa: E402

# Daphne hands each body to the application as it came, unparsed by Twisted.
leave_bodies_unparsed()

# Each request's sync code runs on a thread of its own, kept for later requests.
django_asgi_app = RequestThreads(ASGIStaticFilesHandler(get_asgi_application()))

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from mcpgateway.asgi import route_mcp  # noqa: E402
from runners import wakeup  # noqa: E402
from scorecards.blobs.asgi import route_uploads  # noqa: E402
from scorecards.urls import websocket_urlpatterns  # noqa: E402


def following_changes(app: Any) -> Any:
    """The process's listener started by its first request (once per event loop): the
    changes to users and their API keys it relays let the pages and API keep verified keys
    (`accounts.kept`), as runners' calls start it for their tokens."""

    async def app_following(scope: Any, receive: Any, send: Any) -> None:
        wakeup.listener.ensure_started()
        await app(scope, receive, send)

    return app_following


application = ProtocolTypeRouter(
    {
        # /uploads/… → raw uploads' bytes (before Django: the body read straight into the
        # store); /mcp (and /mcp/) → the MCP gateway; every other path → Django.
        "http": route_uploads(route_mcp(following_changes(django_asgi_app))),
        # The live run pages: session-authenticated, same-origin sockets only.
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)

# Everything loaded so far (Django, the apps, the MCP server's modules) lives as long as the
# process: out of the collector's sight, a full collection no longer walks it each time.
gc.freeze()
# A full collection walks every object alive, and parked long-polls are most of them: with
# 10,000 idle runners each took about a second, and Python's default (after 10 collections
# of the middle generation) ran one every few seconds — a sixth of a core, and pauses of up
# to 2.4 s in every answer. After 1,000 such collections instead: every few minutes at that
# load; the cyclic garbage of the polls answered meanwhile (tens of MiB there) waits for it.
_young, _middle, _ = gc.get_threshold()
gc.set_threshold(_young, _middle, FULL_COLLECTION_AFTER)
