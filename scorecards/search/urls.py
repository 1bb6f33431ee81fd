"""Routes of search: its pages, and the same under /api/."""

from __future__ import annotations

from django.urls import path

from scorecards.search import api, views

urlpatterns = [
    path("runs/<int:run_id>/search", views.run_search_page, name="run-search"),
    path("w/<slug:slug>/search", views.workspace_search_page, name="search"),
]

api_urlpatterns = [
    path("runs/<int:run_id>/search", api.RunSearchView.as_view(), name="api-run-search"),
    path(
        "workspaces/<slug:slug>/search",
        api.WorkspaceSearchView.as_view(),
        name="api-workspace-search",
    ),
]
