"""Routes of a running case's files under /api/."""

from __future__ import annotations

from django.urls import path

from scorecards.files import api

api_urlpatterns = [
    path("runs/<int:run_id>/files", api.CaseFilesView.as_view(), name="api-case-files"),
]
