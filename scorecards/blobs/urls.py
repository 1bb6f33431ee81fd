"""Routes of artifacts under /api/, and of raw uploads beside it (`/uploads/<token>`)."""

from __future__ import annotations

from django.urls import path

from scorecards.blobs import api, views

urlpatterns = [
    path("uploads/<str:token>", views.upload, name="blob-upload"),
]

api_urlpatterns = [
    path("runs/<int:run_id>/artifacts", api.ArtifactView.as_view(), name="api-artifact"),
]
