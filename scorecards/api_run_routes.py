"""REST routes for scorecard runs."""

from __future__ import annotations

from django.urls import path

from scorecards import api_runs

urlpatterns = [
    path("workspaces/<slug:slug>/runs", api_runs.RunCreateView.as_view(), name="api-runs"),
    path("runs/<int:run_id>", api_runs.RunDetailView.as_view(), name="api-run"),
    path("runs/<int:run_id>/logs", api_runs.RunLogsView.as_view(), name="api-run-logs"),
    path("runs/<int:run_id>/cancel", api_runs.RunCancelView.as_view(), name="api-run-cancel"),
]
