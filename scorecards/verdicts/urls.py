"""Routes of a person's verdict and of a regrade: the pages' forms, and the same under /api/."""

from __future__ import annotations

from django.urls import path

from scorecards.verdicts import api, views

urlpatterns = [
    path("runs/<int:run_id>/regrade", views.run_regrade_view, name="run-regrade"),
    path("runs/<int:run_id>/verdict", views.case_verdict_view, name="run-verdict"),
]

api_urlpatterns = [
    path("runs/<int:run_id>/regrade", api.RunRegradeView.as_view(), name="api-run-regrade"),
    path("runs/<int:run_id>/verdict", api.RunVerdictView.as_view(), name="api-run-verdict"),
]
