"""Server-rendered pages: each app contributes its routes."""

from __future__ import annotations

from django.urls import include, path

urlpatterns = [
    path("", include("everdict.pages")),
    path("", include("runners.pages")),
    path("", include("scorecards.pages")),
]
