"""Routes of the scorecards app and its features: pages, the REST API under /api/, and the run
page's socket. The one module that names every feature: each brings its own `urls`."""

from __future__ import annotations

from django.urls import path

from scorecards import views
from scorecards.api import catalog, results, runs, workspaces
from scorecards.blobs import urls as blobs_urls
from scorecards.cases import urls as cases_urls
from scorecards.consumers import RunConsumer
from scorecards.files import urls as files_urls
from scorecards.review import urls as review_urls
from scorecards.search import urls as search_urls
from scorecards.traces import urls as traces_urls
from scorecards.verdicts import urls as verdicts_urls

urlpatterns = [
    path("", views.home, name="home"),
    path("w/<slug:slug>/", views.workspace_overview, name="workspace"),
    path("w/<slug:slug>/harnesses/", views.harnesses, name="harnesses"),
    path("w/<slug:slug>/harnesses/<str:name>/", views.harness_history, name="harness-history"),
    path("w/<slug:slug>/datasets/", views.datasets, name="datasets"),
    path("w/<slug:slug>/runs/", views.run_list, name="runs"),
    path("w/<slug:slug>/runs/new", views.run_new, name="run-new"),
    path("w/<slug:slug>/compare", views.compare, name="compare"),
    path("runs/<int:run_id>/", views.run_detail, name="run"),
    path("runs/<int:run_id>/cancel", views.run_cancel_view, name="run-cancel"),
    path("runs/<int:run_id>/rerun", views.run_rerun_view, name="run-rerun"),
    *verdicts_urls.urlpatterns,
    *review_urls.urlpatterns,
    *search_urls.urlpatterns,
    *cases_urls.urlpatterns,
]

api_urlpatterns = [
    path("workspaces", workspaces.WorkspaceListView.as_view(), name="api-workspaces"),
    path("workspaces/<slug:slug>", workspaces.WorkspaceDetailView.as_view(), name="api-workspace"),
    path(
        "workspaces/<slug:slug>/members",
        workspaces.WorkspaceMembersView.as_view(),
        name="api-workspace-members",
    ),
    path(
        "workspaces/<slug:slug>/harnesses", catalog.HarnessListView.as_view(), name="api-harnesses"
    ),
    path("workspaces/<slug:slug>/datasets", catalog.DatasetListView.as_view(), name="api-datasets"),
    path("workspaces/<slug:slug>/runs", runs.RunCreateView.as_view(), name="api-runs"),
    path("runs/<int:run_id>", runs.RunDetailView.as_view(), name="api-run"),
    path("runs/<int:run_id>/logs", runs.RunLogsView.as_view(), name="api-run-logs"),
    path("runs/<int:run_id>/cancel", runs.RunCancelView.as_view(), name="api-run-cancel"),
    path("runs/<int:run_id>/rerun", runs.RunRerunView.as_view(), name="api-run-rerun"),
    path("runs/<int:run_id>/compare", runs.RunCompareView.as_view(), name="api-run-compare"),
    path("runs/<int:run_id>/results", results.RunResultsView.as_view(), name="api-run-results"),
    path(
        "runs/<int:run_id>/results.csv",
        results.RunExportView.as_view(),
        name="api-run-results-csv",
    ),
    path(
        "runs/<int:run_id>/results.jsonl",
        results.RunJsonlExportView.as_view(),
        name="api-run-results-jsonl",
    ),
    *verdicts_urls.api_urlpatterns,
    *review_urls.api_urlpatterns,
    *search_urls.api_urlpatterns,
    *blobs_urls.api_urlpatterns,
    *files_urls.api_urlpatterns,
    *cases_urls.api_urlpatterns,
    *traces_urls.api_urlpatterns,
]

websocket_urlpatterns = [
    path("ws/runs/<int:run_id>/", RunConsumer.as_asgi()),
]
