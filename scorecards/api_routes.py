"""REST routes of the scorecards app, one list: workspaces, then harnesses, datasets, runs."""

from __future__ import annotations

from django.urls import path

from scorecards import api_workspaces

urlpatterns = [
    # Workspaces and members.
    path("workspaces", api_workspaces.WorkspaceListView.as_view(), name="api-workspaces"),
    path(
        "workspaces/<slug:slug>",
        api_workspaces.WorkspaceDetailView.as_view(),
        name="api-workspace",
    ),
    path(
        "workspaces/<slug:slug>/members",
        api_workspaces.WorkspaceMembersView.as_view(),
        name="api-workspace-members",
    ),
]
