"""A long-poll stays silent for its whole window: the transport's pings start only past it."""

from __future__ import annotations

import inspect
from typing import Any

from mcp.server import _streamable_http_modern as modern

from mcpgateway.server import PING_AFTER_WINDOW_S, build_app, build_server


def test_the_transport_pings_only_past_the_long_poll_window(settings: Any) -> None:
    settings.EVERDICT_MAX_WAIT_MS = 55_000
    build_app(build_server())
    assert modern._SSE_PING_INTERVAL == 55 + PING_AFTER_WINDOW_S
    # The constant set is the one the transport reads between its pings.
    assert "_SSE_PING_INTERVAL" in inspect.getsource(modern.handle_modern_request)
