"""REST routes for the catalog: harness and dataset versions of a workspace."""

from __future__ import annotations

from django.urls import path

from scorecards import api_catalog

urlpatterns = [
    path(
        "workspaces/<slug:slug>/harnesses",
        api_catalog.HarnessListView.as_view(),
        name="api-harnesses",
    ),
    path(
        "workspaces/<slug:slug>/datasets",
        api_catalog.DatasetListView.as_view(),
        name="api-datasets",
    ),
]
