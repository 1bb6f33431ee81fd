"""Routes of artifacts under /api/ (raw uploads, `/uploads/<token>`, are served before Django:
`scorecards.blobs.asgi`)."""

from __future__ import annotations

from django.urls import path

from scorecards.blobs import api

api_urlpatterns = [
    path("runs/<int:run_id>/artifacts", api.ArtifactView.as_view(), name="api-artifact"),
]
