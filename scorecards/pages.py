"""Page routes of the scorecards app: workspaces, catalog, runs, compare."""

from __future__ import annotations

from django.urls import path

from scorecards import views

urlpatterns = [
    path("w/<slug:slug>/", views.workspace_overview, name="workspace"),
    path("w/<slug:slug>/harnesses/", views.harnesses, name="harnesses"),
    path("w/<slug:slug>/datasets/", views.datasets, name="datasets"),
    path("w/<slug:slug>/runs/", views.run_list, name="runs"),
    path("w/<slug:slug>/runs/new", views.run_new, name="run-new"),
    path("w/<slug:slug>/compare", views.compare, name="compare"),
    path("runs/<int:run_id>/", views.run_detail, name="run"),
    path("runs/<int:run_id>/cancel", views.run_cancel_view, name="run-cancel"),
]
