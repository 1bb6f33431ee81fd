"""Routes of a case's trace and screens under /api/."""

from __future__ import annotations

from django.urls import path

from scorecards.traces import api

api_urlpatterns = [
    path("runs/<int:run_id>/trace", api.TraceView.as_view(), name="api-trace"),
    path("runs/<int:run_id>/screens", api.ScreensView.as_view(), name="api-screens"),
    path("runs/<int:run_id>/screens/<str:n>", api.FrameView.as_view(), name="api-frame"),
    path("runs/<int:run_id>/running", api.RunningView.as_view(), name="api-running"),
]
