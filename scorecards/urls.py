"""Routes of the scorecards app: pages, the REST API under /api/, and the run page's socket."""

from __future__ import annotations

from django.urls import path

from scorecards import views
from scorecards.api import artifacts, catalog, files, results, runs, verdicts, workspaces
from scorecards.consumers import RunConsumer
from scorecards.links import case_patterns
from scorecards.traces import urls as traces_urls

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
    path("runs/<int:run_id>/regrade", views.run_regrade_view, name="run-regrade"),
    path("runs/<int:run_id>/verdict", views.case_verdict_view, name="run-verdict"),
    *case_patterns(views.case_page, "case", slash=True),
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
    path("runs/<int:run_id>/regrade", verdicts.RunRegradeView.as_view(), name="api-run-regrade"),
    path("runs/<int:run_id>/verdict", verdicts.RunVerdictView.as_view(), name="api-run-verdict"),
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
    path("runs/<int:run_id>/artifacts", artifacts.ArtifactView.as_view(), name="api-artifact"),
    path("runs/<int:run_id>/files", files.CaseFilesView.as_view(), name="api-case-files"),
    *case_patterns(results.CaseDetailView.as_view(), "api-case", slash=False),
    *traces_urls.api_urlpatterns,
]

websocket_urlpatterns = [
    path("ws/runs/<int:run_id>/", RunConsumer.as_asgi()),
]
