"""The REST API under /api/: each app contributes its routes."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [
    path("", include("everdict.api_routes")),
    path("", include("runners.api_routes")),
    path("", include("scorecards.api_routes")),
    path("", include("scorecards.api_catalog_routes")),
    path("", include("scorecards.api_run_routes")),
]
