"""WebSocket routes of the scorecards app (mounted by everdict.asgi)."""

from __future__ import annotations

from django.urls import path

from scorecards.consumers import RunConsumer

websocket_urlpatterns = [
    path("ws/runs/<int:run_id>/", RunConsumer.as_asgi()),
]
